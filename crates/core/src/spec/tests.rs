//! The spec's unit tests: gates parsed from text, every refusal at its key and line.

use std::path::{Path, PathBuf};

use super::read::plain_types;
use super::*;

fn ctx() -> Context {
    Context {
        gate_dir: PathBuf::from("/g"),
        cache: PathBuf::from("/c"),
        home: Some(PathBuf::from("/home/u")),
    }
}

const GOOD: &str = r#"
[gate]
name = "smoke"
[serve]
command = ["srv", "-m", "{model}", "--port", "{port}", "{gate_dir}/x"]
[request]
model = "~/m.gguf"
max_tokens = 16
prompts = ["What is the capital of France?"]
[assert.route]
fast = "n_threads = 1"
[assert.rate]
floor_tok_s = 10.0
"#;

fn parse_str(s: &str) -> Result<GateSpec, SpecError> {
    parse(Path::new("gates/t.toml"), s, &ctx())
}

#[test]
fn good_gate_expands_placeholders_and_tilde() {
    let g = parse_str(GOOD).unwrap();
    assert_eq!(g.request.model, "/home/u/m.gguf");
    assert_eq!(
        g.serve.mode,
        ServeMode::Command(vec![
            "srv".into(),
            "-m".into(),
            "/home/u/m.gguf".into(),
            "--port".into(),
            "{port}".into(),
            "/g/x".into()
        ])
    );
    assert_eq!(g.assertions.names(), vec!["route", "rate"]);
    assert!(g.request.stream);
}

#[test]
fn misspelt_key_names_file_line_and_key() {
    let bad = GOOD.replace("floor_tok_s", "flor_tok_s");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("gates/t.toml:13:1"), "{e}");
    assert!(e.contains("flor_tok_s"), "{e}");
}

/// `repeats = = 1` (a value missing where the TOML reader stopped) names the line, the key and what must
/// follow the `=`, on one line; not the reader's bare `invalid string` over two lines.
#[test]
fn a_missing_value_names_its_line_and_key_plainly() {
    let bad = GOOD.replace("max_tokens = 16", "max_tokens = 16\nrepeats = = 1");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.starts_with("gates/t.toml:9:11: request.repeats: `repeats = = 1` is not valid TOML: a value must follow `repeats =` (a number, a \"string\", true or false, a [list] or an {inline table}); the TOML reader says: invalid string, "), "{e}");
    assert_eq!(
        e.lines().next().unwrap().matches("invalid string").count(),
        1,
        "{e}"
    );
    // Elsewhere than a value: the reader's words, on one line.
    let e = parse_str(&GOOD.replace("[request]", "[request"))
        .unwrap_err()
        .to_string();
    assert!(e.contains(": not valid TOML: "), "{e}");
}

/// An unknown assertion table gets the nearest known assertions, a close one as a did-you-mean.
#[test]
fn an_unknown_assertion_table_names_the_nearest_known_ones() {
    let e = parse_str(&format!("{GOOD}[assert.telepathy]\nx = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown assertion [assert.telepathy]; the nearest known: `"),
        "{e}"
    );
    assert!(e.contains("; every known one: `route`, `rate`"), "{e}");
    let e = parse_str(&format!("{GOOD}[assert.latancy]\np50_ms = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "unknown assertion [assert.latancy]; did you mean `latency`?; every known one: "
        ),
        "{e}"
    );
}

#[test]
fn a_misspelt_key_gets_a_did_you_mean_and_a_far_one_does_not() {
    let bad = GOOD.replace("floor_tok_s", "flor_tok_s");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("did you mean `floor_tok_s`?"), "{e}");
    let bad = GOOD.replace("floor_tok_s", "Floor-Tok-S");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("did you mean `floor_tok_s`?"), "{e}");
    let bad = GOOD.replace("floor_tok_s", "zebra");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("zebra"), "{e}");
    assert!(!e.contains("did you mean"), "{e}");
    assert_eq!(did_you_mean("expected a number"), "expected a number");
    assert_eq!(
        did_you_mean("unknown field `tmeout_s`, expected `timeout_s`"),
        "unknown field `tmeout_s`, expected `timeout_s`; did you mean `timeout_s`?"
    );
}

#[test]
fn an_integer_is_accepted_where_a_number_is_expected() {
    let g = parse_str(&GOOD.replace("floor_tok_s = ", "floor_tok_s = 60 #")).unwrap();
    assert_eq!(g.assertions.rate.as_ref().unwrap().floor_tok_s, 60.0);
    let g = parse_str(&format!("{GOOD}[assert.first_token]\nlimit_ms = 500\n")).unwrap();
    assert_eq!(g.assertions.first_token.as_ref().unwrap().limit_ms, 500.0);
}

#[test]
fn tpot_limit_is_parsed_in_report_order_and_a_bad_one_refused_with_its_line() {
    let g = parse_str(&format!("{GOOD}[assert.tpot]\nlimit_ms = 40\n")).unwrap();
    assert_eq!(g.assertions.tpot, Some(TpotAssert { limit_ms: 40.0 }));
    assert_eq!(
        g.assertions.kinds(),
        vec![
            AssertionKind::Route,
            AssertionKind::Rate,
            AssertionKind::Tpot
        ]
    );
    assert_eq!(g.assertions.names(), vec!["route", "rate", "tpot"]);
    for bad in ["0", "-3", "nan"] {
        let e = parse_str(&format!("{GOOD}[assert.tpot]\nlimit_ms = {bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("gates/t.toml:15:12"), "{bad}: {e}");
        assert!(e.contains("assert.tpot.limit_ms"), "{bad}: {e}");
    }
    let e = parse_str(&format!("{GOOD}[assert.tpot]\nlimit = 40\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("limit"), "{e}");
    // TPOT needs token arrival times: a whole-body request cannot have one.
    let body = GOOD
        .replace("max_tokens = 16", "max_tokens = 16\nstream = false")
        .replace("[assert.rate]\nfloor_tok_s = 10.0\n", "");
    let e = parse_str(&format!("{body}[assert.tpot]\nlimit_ms = 40\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("[assert.tpot] needs a streamed reply"), "{e}");
}

/// `[assert.rate] source = "both"` with `agree_pct`: parsed; default 20 %; a bad percent or an
/// `agree_pct` without `source = "both"` is refused naming its key.
#[test]
fn rate_source_both_and_agree_pct_parse_and_are_checked() {
    let both = |extra: &str| {
        GOOD.replace(
            "floor_tok_s = 10.0\n",
            &format!("floor_tok_s = 10.0\n{extra}"),
        )
    };
    let g = parse_str(&both("source = \"both\"\nagree_pct = 15.0\n")).unwrap();
    let r = g.assertions.rate.as_ref().unwrap();
    assert_eq!((r.source, r.agree_pct), (RateSource::Both, 15.0));
    let g = parse_str(&both("source = \"both\"\n")).unwrap();
    assert_eq!(g.assertions.rate.unwrap().agree_pct, DEFAULT_AGREE_PCT);
    let e = parse_str(&both("source = \"both\"\nagree_pct = -5.0\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("assert.rate.agree_pct"), "{e}");
    assert!(e.contains("> 0"), "{e}");
    let e = parse_str(&both("agree_pct = 10.0\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("assert.rate.agree_pct"), "{e}");
    assert!(e.contains("only with source = \"both\""), "{e}");
    assert!(parse_str(&both("source = \"either\"\n")).is_err());
}

#[test]
fn floor_not_positive_is_refused_with_its_line() {
    let bad = GOOD.replace("floor_tok_s = 10.0", "floor_tok_s = -1.0");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("gates/t.toml:13:15"), "{e}");
    assert!(e.contains("assert.rate.floor_tok_s"), "{e}");
}

#[test]
fn invalid_regex_is_refused() {
    let bad = GOOD.replace("n_threads = 1", "n_threads = (1");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(
        e.contains("assert.route.fast") && e.contains("invalid regex"),
        "{e}"
    );
    assert!(e.contains(":11:"), "{e}");
}

#[test]
fn no_prompts_is_refused() {
    let bad = GOOD.replace(
        r#"prompts = ["What is the capital of France?"]"#,
        "prompts = []",
    );
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(
        e.contains("request.prompts") && e.contains("at least one prompt"),
        "{e}"
    );
}

#[test]
fn undefined_placeholder_is_refused() {
    let bad = GOOD.replace("{gate_dir}/x", "{modle}");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("`{modle}` is not defined"), "{e}");
    assert!(e.contains("serve.command"), "{e}");
}

#[test]
fn vars_are_placeholders() {
    let g = parse_str(
        &GOOD
            .replace("[serve]", "[vars]\nbin = \"{cache}/bin\"\n[serve]")
            .replace("\"srv\"", "\"{bin}/srv\""),
    )
    .unwrap();
    match g.serve.mode {
        ServeMode::Command(argv) => assert_eq!(argv[0], "/c/bin/srv"),
        _ => panic!(),
    }
}

/// A variable no environment sets (the tests set none: the process environment is shared by every test thread).
const UNSET: &str = "SERVEGATE_TEST_NEVER_SET_7f3a";

#[test]
fn requires_paths_expand_placeholders_like_every_other_path() {
    // Issue 32: `{cache}` in `[requires] paths` was left as written, so the skip said
    // `path {cache}/venv-x/bin/python does not exist` while `servegate check` said ok.
    let g = parse_str(&GOOD.replace(
        "[serve]",
        "[vars]\nvenv = \"{cache}/venv-x\"\n[requires]\npaths = [\"{cache}/m.gguf\", \"{venv}/bin/python\", \"{gate_dir}/t\", \"~/x\"]\n[serve]",
    ))
    .unwrap();
    assert_eq!(
        g.requires.paths,
        vec!["/c/m.gguf", "/c/venv-x/bin/python", "/g/t", "/home/u/x"]
    );
    let unmet = g.requirements().join("; ");
    assert!(
        unmet.contains("path /c/venv-x/bin/python does not exist"),
        "{unmet}"
    );
    assert!(!unmet.contains('{'), "{unmet}");
}

#[test]
fn env_placeholders_expand_and_an_unset_one_is_refused_unless_required() {
    let path = std::env::var("PATH").expect("PATH is set for the tests");
    let g = parse_str(&GOOD.replace("\"srv\"", "\"{env:PATH}/srv\"")).unwrap();
    match g.serve.mode {
        ServeMode::Command(argv) => assert_eq!(argv[0], format!("{path}/srv")),
        _ => panic!(),
    }
    // Unset and not required: refused at its key, naming the variable and the way to skip instead.
    let bad = GOOD.replace("\"srv\"", &format!("\"{{env:{UNSET}}}/srv\""));
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("serve.command"), "{e}");
    assert!(
        e.contains(&format!("the environment variable {UNSET} is not set")),
        "{e}"
    );
    assert!(e.contains("[requires] env"), "{e}");
    // Unset but required: the gate reads, and is skipped by the requirement, said by name.
    let required = bad.replace(
        "[serve]",
        &format!("[requires]\nenv = [\"{UNSET}\"]\n[serve]"),
    );
    let g = parse_str(&required).unwrap();
    let unmet = g.requirements().join("; ");
    assert!(
        unmet.contains(&format!("environment variable {UNSET} is not set")),
        "{unmet}"
    );
    // A name that is no variable.
    let e = parse_str(&GOOD.replace("\"srv\"", "\"{env:}/srv\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("names no environment variable"), "{e}");
}

#[test]
fn warmup_is_rounds_or_a_count_of_requests_never_both() {
    let three = GOOD.replace(
        "prompts = [\"What is the capital of France?\"]",
        "prompts = [\"a?\", \"b?\", \"c?\"]",
    );
    let g = parse_str(&three.replace("max_tokens = 16", "max_tokens = 16\nwarmup = 2")).unwrap();
    assert_eq!((g.request.warmup, g.request.warmup_requests), (2, 6));
    let g = parse_str(&three.replace("max_tokens = 16", "max_tokens = 16\nwarmup_requests = 1"))
        .unwrap();
    assert_eq!((g.request.warmup, g.request.warmup_requests), (0, 1));
    let g = parse_str(&three).unwrap();
    assert_eq!(g.request.warmup_requests, 0);
    let e = parse_str(&three.replace(
        "max_tokens = 16",
        "max_tokens = 16\nwarmup = 1\nwarmup_requests = 1",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("request.warmup_requests") && e.contains("not both"),
        "{e}"
    );
    let e = parse_str(&three.replace("max_tokens = 16", "max_tokens = 16\nwarmup_requests = -1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("request.warmup_requests"), "{e}");
}

#[test]
fn wrong_type_is_named() {
    let bad = GOOD.replace("max_tokens = 16", "max_tokens = \"sixteen\"");
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(
        e.contains("gates/t.toml:8:14") && e.contains("max_tokens = \"sixteen\""),
        "{e}"
    );
}

#[test]
fn empty_file_is_a_clear_error() {
    assert!(parse_str("").unwrap_err().to_string().contains("empty"));
}

#[test]
fn command_and_url_together_are_refused() {
    let bad = GOOD.replace("[request]", "url = \"http://127.0.0.1:1\"\n[request]");
    assert!(parse_str(&bad)
        .unwrap_err()
        .to_string()
        .contains("either `command`"));
}

#[test]
fn untimed_prompts_are_gate_prompts_and_leave_one_timed() {
    let two = GOOD.replace(
        r#"prompts = ["What is the capital of France?"]"#,
        r#"prompts = ["What is the capital of France?", "Tell me a story."]"#,
    );
    // [request] untimed: parsed, each must be a prompt, exactly.
    let ok = two.replace(
        "max_tokens = 16\n",
        "max_tokens = 16\nuntimed = [\"What is the capital of France?\"]\n",
    );
    let g = parse_str(&ok).unwrap();
    assert_eq!(g.request.untimed, ["What is the capital of France?"]);
    assert!(!g.request.timed("What is the capital of France?"));
    assert!(g.request.timed("Tell me a story."));
    let bad = two.replace(
        "max_tokens = 16\n",
        "max_tokens = 16\nuntimed = [\"nope\"]\n",
    );
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(
        e.contains("request.untimed") && e.contains("\"nope\""),
        "{e}"
    );
    // Every prompt untimed while rate times replies: refused.
    let all = two.replace(
        "max_tokens = 16\n",
        "max_tokens = 16\nuntimed = [\"What is the capital of France?\", \"Tell me a story.\"]\n",
    );
    let e = parse_str(&all).unwrap_err().to_string();
    assert!(
        e.contains("every prompt is untimed, but [assert.rate] times replies"),
        "{e}"
    );
    // [assert.known_answer] untimed = true marks its prompt; without a prompt it is refused.
    let ka = format!("{two}[assert.known_answer]\nmatches = \"Paris\"\nprompt = \"What is the capital of France?\"\nuntimed = true\n");
    assert_eq!(
        parse_str(&ka).unwrap().request.untimed,
        ["What is the capital of France?"]
    );
    let e = parse_str(&format!(
        "{two}[assert.known_answer]\nmatches = \"Paris\"\nuntimed = true\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("assert.known_answer.untimed") && e.contains("needs `prompt`"),
        "{e}"
    );
}

#[test]
fn known_answer_prompt_must_be_a_gate_prompt() {
    let bad = format!("{GOOD}[assert.known_answer]\nmatches = \"Paris\"\nprompt = \"nope\"\n");
    assert!(parse_str(&bad)
        .unwrap_err()
        .to_string()
        .contains("assert.known_answer.prompt"));
}

#[test]
fn key_span_finds_keys_tables_and_implicit_tables() {
    let text = "[gate]\nname = \"g\"\n[serve]\nhost = \"h\"\n[assert.rate]\nfloor_tok_s = 1\n[request.extra]\nx = { y = 1 }\n";
    let doc = toml_edit::ImDocument::parse(text).unwrap();
    let line = |k: &str| key_span(doc.as_table(), k).map(|s| line_col(text, s.start).0);
    assert_eq!(line("gate.name"), Some(2));
    assert_eq!(line("serve.host"), Some(4));
    assert_eq!(line("serve"), Some(3));
    // Absent key: the nearest written parent.
    assert_eq!(line("serve.port"), Some(3));
    assert_eq!(
        line("assert"),
        Some(5),
        "implicit [assert]: where its first table is named"
    );
    assert_eq!(line("assert.rate.floor_tok_s"), Some(6));
    assert_eq!(line("request.extra.x.y"), Some(8));
    assert_eq!(line("nope"), None);
    assert_eq!(
        key_at(doc.as_table(), "", text.find("\"h\"").unwrap()).as_deref(),
        Some("serve.host")
    );
}

#[test]
fn hosts_are_addresses_or_names() {
    for ok in [
        "127.0.0.1",
        "::1",
        "[::1]",
        "0.0.0.0",
        "localhost",
        "a-b.c9",
    ] {
        assert!(valid_host(ok), "{ok}");
    }
    for bad in [
        "", " ", "a b", "a/b", "-a", "a-", "a..b", "http://x", "[::1", "x:80",
    ] {
        assert!(!valid_host(bad), "{bad}");
    }
}

#[test]
fn url_authorities_are_checked() {
    for ok in [
        "http://127.0.0.1:8080",
        "https://api.example.com",
        "http://[::1]:9/v1",
        "http://h:1/x?y",
    ] {
        assert!(valid_url_authority(ok), "{ok}");
    }
    for bad in [
        "http://",
        "http://:80",
        "http://a b:80",
        "http://h:0",
        "http://h:x",
        "http://u@h",
        "http://[::1",
    ] {
        assert!(!valid_url_authority(bad), "{bad}");
    }
}

#[test]
fn type_names_are_words() {
    assert_eq!(
        plain_types("invalid type: string \"x\", expected f64"),
        "invalid type: string \"x\", expected a number"
    );
    assert_eq!(
        plain_types("invalid type: string \"x\", expected a sequence"),
        "invalid type: string \"x\", expected a list of strings"
    );
    assert!(
        plain_types("invalid type: floating point `1.5`, expected i64")
            .contains("number `1.5`, expected a whole number")
    );
}

#[test]
fn vars_expand_in_file_order_not_name_order() {
    let g = GOOD.replace(
        "[serve]",
        "[vars]\nzz = \"/base\"\naa = \"{zz}/x\"\n[serve]",
    );
    let spec = parse_str(&g).unwrap();
    assert_eq!(spec.source, g);
    let bad = GOOD.replace(
        "[serve]",
        "[vars]\naa = \"{zz}/x\"\nzz = \"/base\"\n[serve]",
    );
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(e.contains("vars.aa") && e.contains("{zz}"), "{e}");
}

#[test]
fn errors_without_a_span_name_the_keys_line() {
    let bad = GOOD.replace("[request]", "ready = \"health\"\n[request]");
    let line = bad.lines().position(|l| l.starts_with("ready")).unwrap() + 1;
    let e = parse_str(&bad).unwrap_err().to_string();
    assert!(
        e.contains(&format!(":{line}:")) && e.contains("serve.ready"),
        "{e}"
    );
}

#[test]
fn declaring_lines_are_the_ones_the_file_text_gives() {
    // Every gate of gates/ (matrix entries included): the line kept at parse time is the one found by
    // reading the file's text again, for every trial name.
    let mut seen = 0;
    for entry in
        std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../gates"))
            .unwrap()
    {
        let file = entry.unwrap().path();
        if file.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for g in matrix::load_all(&file).unwrap() {
            for name in g.trial_names() {
                assert_eq!(
                    g.decl_line_of(&name),
                    line_in(&text, &name),
                    "{file:?} {name}"
                );
                seen += 1;
            }
            for k in g.assertions.kinds() {
                assert!(g.decl_line(k).is_some_and(|l| l > 1), "{file:?} {k}");
            }
            assert_eq!(g.decl_line(AssertionKind::Load), None);
        }
    }
    assert!(seen > 10, "{seen}");
    // Inline `[assert]` keys and the `floor_tok_s` line of `[assert.rate]`.
    let text = GOOD
        .replace("[assert.rate]\n", "")
        .replace("floor_tok_s = 10.0\n", "")
        .replace(
            "[assert.route]",
            "[assert]\ncontent = {}\n[assert.rate]\nsource = \"client\"\nfloor_tok_s = 1.0\n[assert.route]",
        );
    let g = parse_str(&text).unwrap();
    for k in [
        AssertionKind::Content,
        AssertionKind::Rate,
        AssertionKind::Route,
    ] {
        assert_eq!(g.decl_line(k), Some(line_in(&text, k.name())), "{k}");
    }
    assert_eq!(g.decl_line(AssertionKind::Tpot), None);
}

#[test]
fn line_col_counts_from_one() {
    assert_eq!(line_col("ab\ncd", 3), (2, 1));
    assert_eq!(line_col("ab\ncd", 1), (1, 2));
}

#[test]
fn samplers_parse_and_each_bad_one_is_refused_at_its_key() {
    let good = format!(
        "{GOOD}\n[[sample]]\nname = \"npu_mem\"\ncommand = [\"{{gate_dir}}/xrt-smi\", \"examine\"]\nregex = 'Memory: (?P<value>[\\d.]+) MiB'\nunit = \"MiB\"\nevery_ms = 1000\n[[sample]]\nname = \"power\"\npath = \"~/hwmon/power1_input\"\nregex = '(\\d+)'\nunit = \"uW\"\nevery_ms = 500\ntimeout_ms = 200\n"
    );
    let g = parse_str(&good).unwrap();
    assert_eq!(g.samples.len(), 2);
    assert_eq!(
        g.samples[0].source,
        sample::SampleSource::Command(vec!["/g/xrt-smi".into(), "examine".into()])
    );
    assert_eq!(
        (g.samples[0].every_ms, g.samples[0].timeout_ms),
        (1000, 1000)
    );
    assert_eq!(
        g.samples[1].source,
        sample::SampleSource::Path("/home/u/hwmon/power1_input".into())
    );
    assert_eq!(g.samples[1].timeout_ms, 200);
    let base = "\n[[sample]]\nregex = '(\\d+)'\nunit = \"W\"\n";
    for (extra, key, why) in [
        (
            "name = \"Bad-Name\"\npath = \"/x\"\nevery_ms = 500\n",
            "sample[0].name",
            "lower-case",
        ),
        (
            "name = \"p\"\nevery_ms = 500\n",
            "sample[0]",
            "needs command",
        ),
        (
            "name = \"p\"\npath = \"/x\"\ncommand = [\"c\"]\nevery_ms = 500\n",
            "sample[0].path",
            "not both",
        ),
        (
            "name = \"p\"\ncommand = []\nevery_ms = 500\n",
            "sample[0].command",
            "is empty",
        ),
        (
            "name = \"p\"\npath = \"/x\"\nevery_ms = 5\n",
            "sample[0].every_ms",
            "100 to 3600000",
        ),
        (
            "name = \"p\"\npath = \"/x\"\nevery_ms = 500\ntimeout_ms = 0\n",
            "sample[0].timeout_ms",
            "100 to",
        ),
    ] {
        let e = parse_str(&format!("{GOOD}{base}{extra}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains(why), "{extra}: {e}");
        assert!(e.contains("gates/t.toml:"), "points at a line: {e}");
    }
    let e = parse_str(&format!("{GOOD}{base}name = \"p\"\npath = \"/x\"\nevery_ms = 500\n{base}name = \"p\"\npath = \"/y\"\nevery_ms = 500\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("names two samplers"), "{e}");
    let e = parse_str(&format!("{GOOD}\n[[sample]]\nname = \"p\"\npath = \"/x\"\nregex = '.*'\nunit = \"W\"\nevery_ms = 500\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sample[0].regex") && e.contains("matches the empty text"),
        "{e}"
    );
}

#[test]
fn the_cancel_check_takes_the_declared_engine_s_cancellation_line_unless_the_gate_names_one() {
    let with = |engine: &str, table: &str| {
        let text = GOOD.replace("[serve]\n", &format!("[serve]\n{engine}"))
            + &format!("[contract]\nexpect = [\"cancel\"]\nknown_fail = [\"models\"]\n{table}");
        let g = parse_str(&text).unwrap();
        let c = g.contract.unwrap();
        (c.checks[0].log_line.clone(), c.checks[1].known_fail)
    };
    let (line, known) = with("engine = \"llama.cpp\"\n", "");
    assert_eq!(
        line.as_deref(),
        profile::Engine::LlamaCpp.profile().cancel_line
    );
    assert!(known);
    assert_eq!(with("", "").0, None);
    assert_eq!(
        with(
            "engine = \"llama.cpp\"\n",
            "[contract.cancel]\nlog_line = 'client gone'\n"
        )
        .0
        .as_deref(),
        Some("client gone")
    );
}

#[test]
fn check_names_the_expected_dialect_the_gateway_route_and_whether_the_profile_ran_here() {
    let text = GOOD.replace("[serve]\n", "[serve]\nengine = \"transformers\"\n");
    let g = parse_str(&text).unwrap();
    let line = profile::effective(&g.serve, &g.request).unwrap();
    assert!(
        line.starts_with("engine transformers: ready /health, clock none, greedy fields {}")
            && line.contains("version from the gate's [record] engine_version (no endpoint)")
            && line.contains(", expected dialect no_done_marker + usage_on_finish_chunk;")
            && line.ends_with(
                "tested live (transformers 5.19.0 from the vLLM venv on SmolLM2-135M float32; tests/data/runtimes/transformers/)"
            ),
        "{line}"
    );
    let text = GOOD.replace("[serve]\n", "[serve]\nengine = \"litellm\"\n");
    let g = parse_str(&text).unwrap();
    let line = profile::effective(&g.serve, &g.request).unwrap();
    assert!(
        line.contains(
            "a gateway: prove the route per reply with [assert.route] header = \"x-litellm-model-id\""
        ) && line.contains("; tested live (litellm 1.108.7"),
        "{line}"
    );
}
