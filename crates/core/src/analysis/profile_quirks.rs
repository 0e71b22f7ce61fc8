//! Each engine profile's quirks (spec/profile/engines.rs) as tests, here because they read streams: a stream in the engine's dialect (built from its source, or from the
//! capture where it runs here) is a complete reply carrying exactly the profile's dialect notes, never a cut
//! stream; route lines compile and match the line the engine writes; the table's bookkeeping holds.

use crate::analysis::reply::parse_stream;
use crate::io::reads::TimedRead;
use crate::spec::profile::{Engine, Tested};
use crate::vocab::NoteKind;

/// A chunk event: `obj` members, one choice with `delta` and `finish`.
fn chunk(extra: &str, delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"object\":\"chat.completion.chunk\"{extra},\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

const USAGE: &str = r#","usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}"#;
const DONE: &str = "data: [DONE]\n\n";

/// A 3-token greedy reply as `e` streams it (from the engine's source; see its `sources`).
fn stream_of(e: Engine) -> String {
    let tokens = [
        r#"{"content":"Par"}"#,
        r#"{"content":"is"}"#,
        r#"{"content":"."}"#,
    ];
    let mut out = chunk("", r#"{"role":"assistant"}"#, "null");
    for t in tokens {
        out.push_str(&chunk("", t, "null"));
    }
    match e {
        // transformers serve: usage on the finish chunk and no [DONE] (captured on 5.19.0).
        Engine::Transformers => out.push_str(&chunk(USAGE, "{}", r#""stop""#)),
        // mistral.rs and FastFlowLM: usage on the finish chunk, then [DONE].
        Engine::MistralRs | Engine::FastFlowLm => {
            out.push_str(&chunk(USAGE, "{}", r#""stop""#));
            out.push_str(DONE);
        }
        // llama-cpp-python: no usage chunk at all.
        Engine::LlamaCppPython => {
            out.push_str(&chunk("", "{}", r#""stop""#));
            out.push_str(DONE);
        }
        // The OpenAI layout: finish chunk, a usage chunk with `choices: []`, [DONE].
        _ => {
            out.push_str(&chunk("", "{}", r#""stop""#));
            out.push_str(&format!(
                "data: {{\"object\":\"chat.completion.chunk\",\"choices\":[]{USAGE}}}\n\n"
            ));
            out.push_str(DONE);
        }
    }
    out
}

/// The dialect notes a reply carries, among those a profile can declare.
fn dialect_notes(body: &str) -> (Vec<NoteKind>, crate::analysis::reply::Reply) {
    let reads = [TimedRead {
        recv_ms: None,
        t_ms: 0.0,
        bytes: body.as_bytes().to_vec(),
    }];
    let r = parse_stream(&reads, Some(200));
    let kinds = [
        NoteKind::NoDoneMarker,
        NoteKind::UsageOnFinishChunk,
        NoteKind::UsageMissing,
    ];
    let seen = kinds.into_iter().filter(|k| r.has_note(*k)).collect();
    (seen, r)
}

#[test]
fn a_stream_in_each_engines_dialect_is_complete_and_carries_exactly_its_profiles_dialect_notes() {
    for e in Engine::ALL {
        let p = e.profile();
        let (seen, r) = dialect_notes(&stream_of(e));
        assert!(!r.truncated, "{e}: a {e} stream read as cut");
        assert_eq!(r.failure(), None, "{e}");
        assert_eq!(r.content, "Paris.", "{e}");
        let mut want = p.dialect.to_vec();
        want.sort_by_key(|k| k.name());
        let mut seen = seen;
        seen.sort_by_key(|k| k.name());
        // llama-cpp-python's missing usage is noted only when usage was asked for; the rest exactly.
        if e != Engine::LlamaCppPython {
            assert_eq!(seen, want, "{e}: dialect notes");
        }
    }
}

#[test]
fn transformers_serve_without_done_is_not_a_cut_stream_but_the_same_stream_cut_early_is() {
    let whole = stream_of(Engine::Transformers);
    let (seen, r) = dialect_notes(&whole);
    assert!(seen.contains(&NoteKind::NoDoneMarker) && seen.contains(&NoteKind::UsageOnFinishChunk));
    assert!(!r.truncated && r.failure().is_none());
    assert_eq!(r.usage.as_ref().map(|u| u.completion_tokens), Some(Some(3)));
    // The same dialect without its finish chunk is a cut stream: the quirk excuses only [DONE].
    let cut = whole[..whole.rfind("data: ").unwrap()].to_string();
    let (_, r) = dialect_notes(&cut);
    assert!(
        r.truncated,
        "a transformers stream without its finish chunk must read as cut"
    );
}

#[test]
fn greedy_fields_of_an_engine_that_refuses_unknown_fields_are_openai_fields_only() {
    // transformers serve answers 422 to any field outside the OpenAI request (captured:
    // tests/data/runtimes/transformers/extra_field.body), so its greedy fields must be OpenAI ones.
    const OPENAI: &[&str] = &["frequency_penalty", "presence_penalty", "top_p", "seed"];
    for (k, _) in Engine::Transformers.profile().greedy_fields {
        assert!(
            OPENAI.contains(k),
            "{k} would be refused by transformers serve"
        );
    }
    // Ollama's OpenAI endpoint ignores non-OpenAI fields: none is sent as a greedy field.
    assert!(Engine::Ollama.profile().greedy_fields.is_empty());
}

#[test]
fn route_lines_compile_and_match_the_line_each_engine_writes() {
    let lines: &[(Engine, &str)] = &[
        // tests/data/runtimes/transformers/serve.log (5.19.0).
        (
            Engine::Transformers,
            "[transformers] [Request received] Model: /m/SmolLM2-135M-Instruct.Q4_1.f32-hf@main, CB: False",
        ),
        // ollama app/server/server_test.go's captured log line.
        (
            Engine::Ollama,
            r#"time=2025-07-01T17:59:51.470Z level=INFO source=types.go:130 msg="inference compute" id=0 library=cpu variant="" compute="" driver=0.0 name="" total="31.3 GiB" available="30.4 GiB""#,
        ),
        // lemonade src/cpp/server/server.cpp's telemetry line, as its format writes it.
        (
            Engine::Lemonade,
            "Inference completed: model=Qwen3-0.6B-GGUF, tokens=42 (in=30, out=12), ttft=0.21s, tps=38.50",
        ),
    ];
    for (e, line) in lines {
        let p = e.profile();
        assert!(
            p.route_lines
                .iter()
                .any(|re| regex::Regex::new(re).unwrap().is_match(line)),
            "{e}: no route line matches {line:?}"
        );
    }
    for e in Engine::ALL {
        for re in e.profile().route_lines {
            regex::Regex::new(re).unwrap_or_else(|err| panic!("{e}: {re}: {err}"));
        }
    }
}

#[test]
fn every_profile_names_its_sources_port_and_whether_it_ran_here() {
    let live: Vec<Engine> = Engine::ALL
        .into_iter()
        .filter(|e| matches!(e.profile().tested, Tested::Live(_)))
        .collect();
    assert_eq!(
        live,
        [
            Engine::LlamaCpp,
            Engine::LlamaCppPython,
            Engine::Vllm,
            Engine::Transformers,
            Engine::Litellm
        ]
    );
    for e in Engine::ALL {
        let p = e.profile();
        assert_eq!(p.engine, e);
        assert!(!p.sources.is_empty(), "{e}: no source");
        assert!(p.default_port.is_some(), "{e}: no default port");
        assert!(!p.usage.is_empty(), "{e}: how it counts tokens");
        assert!(p.ready_path.starts_with('/'), "{e}");
        assert!(p.tested.describe().contains(if live.contains(&e) {
            "tested live"
        } else {
            "documented only"
        }));
    }
    // The gateway: its route is per reply, by header, and never its own start-up lines.
    let g: Vec<Engine> = Engine::ALL
        .into_iter()
        .filter(|e| e.profile().gateway)
        .collect();
    assert_eq!(g, [Engine::Litellm]);
    let l = Engine::Litellm.profile();
    assert!(l.route_lines.is_empty());
    assert_eq!(
        l.route_headers,
        ["x-litellm-model-id", "x-litellm-model-api-base"]
    );
}
