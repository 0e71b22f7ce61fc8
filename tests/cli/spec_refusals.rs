//! Specs that cannot mean nothing (and `stream = false`, under which a figure cannot be measured). Each gate below
//! is refused by `servegate check` with exit 3, and the message names the file, the line the offending key is
//! on (never a default `:1:`), and the key.

use crate::fixtures;
use std::path::{Path, PathBuf};

/// A valid command gate; each case edits one part of it.
const BASE: &str = r#"[gate]
name = "ok"
[serve]
command = ["python3", "serve.py", "--port", "{port}"]
[request]
model = "m"
max_tokens = 8
prompts = ["hi"]
[assert.content]
"#;

struct Checked {
    code: Option<i32>,
    out: String,
}

fn check(dir: &Path, text: &str) -> (PathBuf, Checked) {
    let file = dir.join("g.toml");
    std::fs::write(&file, text).unwrap();
    let o = fixtures::servegate()
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (
        file,
        Checked {
            code: o.status.code(),
            out,
        },
    )
}

/// 1-based number of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in\n{text}"))
        + 1
}

/// `text` is refused with exit 3 at `FILE:LINE:` (the line holding `at`), naming `key` and saying `says`.
fn refused(text: &str, at: &str, key: &str, says: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let (file, c) = check(tmp.path(), text);
    assert_eq!(
        c.code,
        Some(3),
        "expected a refusal:\n{text}\n---\n{}",
        c.out
    );
    let line = line_of(text, at);
    let loc = format!("{}:{line}:", file.display());
    assert!(c.out.contains(&loc), "expected {loc} in:\n{}", c.out);
    assert!(c.out.contains(key), "expected key {key:?} in:\n{}", c.out);
    assert!(c.out.contains(says), "expected {says:?} in:\n{}", c.out);
    assert!(!c.out.contains("panicked"), "{}", c.out);
    c.out
}

fn accepted(text: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (_, c) = check(tmp.path(), text);
    assert_eq!(c.code, Some(0), "expected valid:\n{text}\n---\n{}", c.out);
}

fn with(old: &str, new: &str) -> String {
    assert!(BASE.contains(old));
    BASE.replace(old, new)
}

#[test]
fn base_gate_is_valid() {
    accepted(BASE);
}

#[test]
fn command_with_an_empty_program_is_refused() {
    let t = with(r#"["python3", "serve.py", "--port", "{port}"]"#, r#"[""]"#);
    refused(&t, "command =", "serve.command", "program) is empty");
    let t = with(
        r#"["python3", "serve.py", "--port", "{port}"]"#,
        r#"["  ", "x"]"#,
    );
    refused(&t, "command =", "serve.command", "program) is empty");
}

#[test]
fn setup_with_an_empty_program_is_refused() {
    let t = with("[request]", "setup = [\"\", \"x\"]\n[request]");
    refused(&t, "setup =", "serve.setup", "program) is empty");
}

#[test]
fn pair_arm_with_an_empty_program_is_refused() {
    let t = r#"[gate]
name = "p"
[serve]
[pair.ours]
command = ["", "m.gguf"]
[pair.theirs]
command = ["b", "m.gguf"]
[request]
model = "m.gguf"
max_tokens = 8
temperature = 0.0
top_k = 1
prompts = ["hi"]
[assert.same_answers]
"#;
    refused(
        t,
        "command = [\"\"",
        "pair.ours.command",
        "program) is empty",
    );
}

#[test]
fn empty_hold_lock_is_refused() {
    let t = format!("{BASE}[hold]\nlock = \"\"\n");
    refused(&t, "lock =", "hold.lock", "must name a lock file");
}

#[test]
fn empty_requires_entries_are_refused() {
    let t = BASE.replace(
        "[serve]",
        "[requires]\npaths = [\"/dev/null\", \"\"]\n[serve]",
    );
    refused(&t, "paths =", "requires.paths", "an entry is empty");
    let t = BASE.replace("[serve]", "[requires]\ncommands = [\" \"]\n[serve]");
    refused(&t, "commands =", "requires.commands", "an entry is empty");
}

#[test]
fn invalid_host_is_refused() {
    for host in [
        "",
        "not a host",
        "host/path",
        "-lead.example",
        "a..b",
        "http://x",
    ] {
        let t = with("[request]", &format!("host = {host:?}\n[request]"));
        refused(
            &t,
            "host =",
            "serve.host",
            "not an IP address or a host name",
        );
    }
    for host in ["127.0.0.1", "::1", "[::1]", "localhost", "gpu-box.lan"] {
        accepted(&with("[request]", &format!("host = {host:?}\n[request]")));
    }
    // The host of a `url` serve too.
    for url in [
        "http:///v1",
        "http://a b:8080",
        "http://h:0",
        "http://h:port",
    ] {
        let t = with(
            r#"command = ["python3", "serve.py", "--port", "{port}"]"#,
            &format!("url = {url:?}"),
        );
        refused(&t, "url =", "serve.url", "valid host");
    }
}

#[test]
fn route_pattern_matching_everything_is_refused() {
    let t = format!("{BASE}[assert.route]\nfast = \"\"\n");
    refused(&t, "fast =", "assert.route.fast", "matches the empty text");
    let t = format!("{BASE}[assert.route]\nfast = \"fast\"\nslow = \".*\"\n");
    refused(&t, "slow =", "assert.route.slow", "matches the empty text");
}

#[test]
fn known_answer_matching_everything_is_refused() {
    let t = format!("{BASE}[assert.known_answer]\nmatches = \"\"\n");
    refused(
        &t,
        "matches =",
        "assert.known_answer.matches",
        "matches the empty text",
    );
    let t = format!("{BASE}[assert.known_answer]\nmatches = \"(?i)x?\"\n");
    refused(
        &t,
        "matches =",
        "assert.known_answer.matches",
        "matches the empty text",
    );
}

#[test]
fn gate_names_that_leave_the_evidence_root_are_refused() {
    for name in [".", "..", ".hidden", "a/b", "../x", "a\\\\b", "-rf"] {
        let t = with("name = \"ok\"", &format!("name = \"{name}\""));
        refused(&t, "name =", "gate.name", "");
    }
}

#[test]
fn log_file_on_a_command_serve_is_refused() {
    let t = with("[request]", "log_file = \"/tmp/x.log\"\n[request]");
    refused(&t, "log_file =", "serve.log_file", "`url` serves only");
}

#[test]
fn route_on_a_url_serve_without_log_file_is_refused_before_any_request() {
    let t = r#"[gate]
name = "u"
[serve]
url = "http://127.0.0.1:9"
[request]
model = "m"
max_tokens = 8
prompts = ["hi"]
[assert.route]
fast = "fast path"
"#;
    refused(t, "fast =", "assert.route", "set serve.log_file");
    let ok = t.replace("url = ", "log_file = \"/tmp/serve.log\"\nurl = ");
    accepted(&ok);
}

#[test]
fn extra_keys_that_override_the_request_are_refused() {
    for key in [
        "max_tokens",
        "model",
        "messages",
        "stream",
        "temperature",
        "stream_options",
    ] {
        let t = format!("{BASE}[request.extra]\n{key} = 1\n");
        refused(
            &t,
            &format!("{key} = 1"),
            &format!("request.extra.{key}"),
            "silently override",
        );
    }
    // An inline table too.
    let t = BASE.replace("prompts", "extra = { max_tokens = 4096 }\nprompts");
    refused(
        &t,
        "extra =",
        "request.extra.max_tokens",
        "silently override",
    );
    accepted(&format!(
        "{BASE}[request.extra]\nchat_template_kwargs = {{ enable_thinking = false }}\n"
    ));
}

#[test]
fn stream_false_with_a_timing_assertion_is_refused() {
    let t = format!(
        "{}[assert.rate]\nfloor_tok_s = 10\n",
        with("max_tokens = 8", "max_tokens = 8\nstream = false")
    );
    refused(
        &t,
        "stream = false",
        "request.stream",
        "needs a streamed reply",
    );
    let t = format!(
        "{}[assert.first_token]\nlimit_ms = 100\n",
        with("max_tokens = 8", "max_tokens = 8\nstream = false")
    );
    refused(
        &t,
        "stream = false",
        "request.stream",
        "needs a streamed reply",
    );
    accepted(&with("max_tokens = 8", "max_tokens = 8\nstream = false"));
}

#[test]
fn vars_resolve_in_file_order() {
    // `zdir` comes first in the file and `adir` uses it: valid, though `adir` sorts first.
    let t = BASE.replace(
        "[serve]",
        "[vars]\nzdir = \"/opt\"\nadir = \"{zdir}/models\"\n[serve]",
    );
    accepted(&t);
    // A var using one defined below it is refused, at its own line.
    let t = BASE.replace(
        "[serve]",
        "[vars]\nadir = \"{zdir}/models\"\nzdir = \"/opt\"\n[serve]",
    );
    refused(&t, "adir =", "vars.adir", "`{zdir}` is not defined");
}

#[test]
fn type_errors_say_what_was_expected_in_words() {
    let t = format!("{BASE}[assert.rate]\nfloor_tok_s = \"fast\"\n");
    let out = refused(&t, "floor_tok_s =", "assert.rate.floor_tok_s", "a number");
    assert!(!out.contains("f64"), "{out}");
    let t = with("prompts = [\"hi\"]", "prompts = \"hi\"");
    let out = refused(&t, "prompts =", "request.prompts", "a list of strings");
    assert!(!out.contains("sequence"), "{out}");
    let t = with("model = \"m\"", "model = 3");
    refused(&t, "model =", "request.model", "a string");
    let t = with("max_tokens = 8", "max_tokens = 8.5");
    let out = refused(&t, "max_tokens =", "request.max_tokens", "a whole number");
    assert!(!out.contains("i64"), "{out}");
}

#[test]
fn a_gate_file_over_the_size_cap_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = BASE.to_string();
    let pad = "# padding padding padding padding padding padding padding padding\n";
    while text.len() <= (1 << 20) {
        text.push_str(pad);
    }
    let (file, c) = check(tmp.path(), &text);
    assert_eq!(c.code, Some(3), "{}", c.out);
    assert!(c.out.contains(&file.display().to_string()), "{}", c.out);
    assert!(c.out.contains("over 1 MiB"), "{}", c.out);
}

/// The errors that reported `:1:1:` (a span unknown to the validator) now name the key's own line. Each case:
/// the gate, the text on the line the error must point at, the key.
#[test]
fn every_spec_error_names_its_line() {
    let pair = |tail: &str| {
        format!(
            r#"[gate]
name = "p"
[serve]
[pair.ours]
command = ["a", "m.gguf"]
[pair.theirs]
command = ["b", "m.gguf"]
[request]
model = "m.gguf"
max_tokens = 8
{tail}
prompts = ["hi"]
"#
        )
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (
            with("model = \"m\"", "model = \"{nope}\""),
            "model =",
            "request.model",
        ),
        (
            with("max_tokens = 8", "max_tokens = 8\ntemperature = -1.0"),
            "temperature =",
            "request.temperature",
        ),
        (
            with("[request]", "setup = [\"{nope}\"]\n[request]"),
            "setup =",
            "serve.setup",
        ),
        (
            with("[request]", "ready = \"health\"\n[request]"),
            "ready =",
            "serve.ready",
        ),
        (
            with("[request]", "[serve.env]\nA = \"{nope}\"\n[request]"),
            "A =",
            "serve.env.A",
        ),
        (
            with("[request]", "api_key_env = \"sk-123 456\"\n[request]"),
            "api_key_env =",
            "serve.api_key_env",
        ),
        (
            format!("{BASE}[hold]\nlock = \"{{nope}}\"\n"),
            "lock =",
            "hold.lock",
        ),
        (
            BASE.replace(
                "command = [\"python3\", \"serve.py\", \"--port\", \"{port}\"]\n",
                "",
            ),
            "[serve]",
            "serve",
        ),
        (BASE.replace("[assert.content]\n", ""), "max_tokens", ""),
        (
            format!("{BASE}[assert.ratio]\nat_least = 1.0\n"),
            "[assert.ratio]",
            "assert",
        ),
        (
            format!(
                "{}[assert.ratio]\nmetric = \"decode\"\n",
                pair("temperature = 0.0\ntop_k = 1")
            ),
            "[assert.ratio]",
            "assert.ratio",
        ),
        (
            format!(
                "{}[assert.same_answers]\nprompt = \"other\"\n",
                pair("temperature = 0.0\ntop_k = 1")
            ),
            "prompt = \"other\"",
            "assert.same_answers.prompt",
        ),
        (
            format!("{}[assert.same_answers]\n", pair("temperature = 0.0")),
            "[request]",
            "request",
        ),
        (
            format!(
                "{}[assert.same_answers]\n[assert.rate]\nfloor_tok_s = 1\n",
                pair("temperature = 0.0\ntop_k = 1")
            ),
            "[assert.rate]",
            "assert.rate",
        ),
        // toml's own "missing field": the table's path and the key, at the table's header.
        (
            with("max_tokens = 8\n", ""),
            "[request]",
            "request.max_tokens",
        ),
        (
            format!("{BASE}[assert.rate]\nsource = \"client\"\n"),
            "[assert.rate]",
            "assert.rate.floor_tok_s",
        ),
        // A required table missing: at the end of the file, naming it.
        (
            BASE.replace(
                "[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\n",
                "",
            ),
            "[assert.content]",
            "request",
        ),
        (
            format!("{BASE}[record]\nmodel_name = \"m\"\nfoo = 1\n"),
            "foo = 1",
            "record.foo",
        ),
    ];
    for (text, at, key) in cases {
        let line = line_of(&text, at);
        assert!(line > 1, "case must not put its key on line 1: {text}");
        // The no-assertion case has no key line of its own; it names [assert]'s absence at the file's end or
        // a table: only require that it is not line 1.
        if key.is_empty() {
            let tmp = tempfile::tempdir().unwrap();
            let (file, c) = check(tmp.path(), &text);
            assert_eq!(c.code, Some(3), "{}", c.out);
            assert!(
                !c.out.contains(&format!("{}:1:", file.display())),
                "{}",
                c.out
            );
            continue;
        }
        refused(&text, at, key, "");
    }
}

/// A load gate on BASE's request with `load` as its `[load]` body.
fn load_gate(load: &str) -> String {
    BASE.replace(
        "[assert.content]\n",
        &format!("[load]\n{load}\n[assert.errors]\n"),
    )
}

/// `client_cpus` of the wrong type says what it takes (a count or CPU ids), not a sweep's words.
#[test]
fn client_cpus_of_the_wrong_type_says_a_count_or_cpu_ids() {
    let t = load_gate("concurrency = 2\nrequests = 4\nclient_cpus = \"all\"");
    let out = refused(
        &t,
        "client_cpus =",
        "load.client_cpus",
        "must be a whole number (the first N CPUs the runner may use) or a list of CPU ids ([0, 2])",
    );
    assert!(!out.contains("sweep"), "{out}");
}

/// Numbers `check` accepted and `run` could not survive: a rate so small its schedule overflows the clock
/// (`rate_rps = 1e-25` panicked the load client) or its directory name runs to 302 bytes (`1e-300`), a
/// `rate_rps x duration_s` that sized an 800 GB allocation, a sweep or warmup without end.
#[test]
fn load_numbers_that_a_run_cannot_survive_are_refused() {
    for r in ["1e-25", "1e-300", "0.001", "[8, 1e-25]", "200000"] {
        let t = load_gate(&format!("rate_rps = {r}\nrequests = 10"));
        refused(
            &t,
            "rate_rps =",
            "load.rate_rps",
            "each rate must be a number from 0.01 to 100000",
        );
    }
    accepted(&load_gate("rate_rps = 0.01\nrequests = 10"));
    let t = load_gate("rate_rps = 100000\nduration_s = 1000000");
    refused(
        &t,
        "duration_s =",
        "load.duration_s",
        "plans 1e11 requests at one point: a point plans at most 1000000",
    );
    accepted(&load_gate("rate_rps = 100\nduration_s = 10000"));
    let t = load_gate("concurrency = 4\nrequests = 1000000\nwarmup_requests = 5");
    refused(
        &t,
        "warmup_requests =",
        "load.warmup_requests",
        "1000000 judged + 5 warmup requests",
    );
    let sweep: Vec<String> = (1..=65).map(|c| c.to_string()).collect();
    let t = load_gate(&format!(
        "concurrency = [{}]\nrequests = 10",
        sweep.join(", ")
    ));
    refused(
        &t,
        "concurrency =",
        "load.concurrency",
        "at most 64 points, got 65",
    );
}

/// Messages that named no key or an internal type: `concurrency = 4.0` said "untagged enum OneOrMany", an
/// integer past 64 bits "number too large to fit in target type". Each names the key and the rule.
#[test]
fn type_and_size_errors_name_the_key_and_the_rule() {
    let out = refused(
        &load_gate("concurrency = 4.0\nrequests = 10"),
        "concurrency =",
        "load.concurrency",
        "must be a whole number or a list of whole numbers",
    );
    assert!(
        !out.contains("OneOrMany") && !out.contains("untagged"),
        "{out}"
    );
    let out = refused(
        &load_gate("rate_rps = \"fast\"\nrequests = 10"),
        "rate_rps =",
        "load.rate_rps",
        "must be a number or a list of numbers",
    );
    assert!(!out.contains("OneOrMany"), "{out}");
    let t = with("max_tokens = 8", "max_tokens = 99999999999999999999");
    let out = refused(
        &t,
        "max_tokens =",
        "request.max_tokens",
        "integer too large",
    );
    assert!(!out.contains("target type"), "{out}");
    let t = with("max_tokens = 8", "max_tokens = 8\ntop_p = 1.5");
    refused(
        &t,
        "top_p =",
        "request.top_p",
        "must be a number from 0 to 1",
    );
}

/// BASE on a serve already running (`url`).
fn url_gate() -> String {
    with(
        "command = [\"python3\", \"serve.py\", \"--port\", \"{port}\"]",
        "url = \"http://127.0.0.1:8080\"",
    )
}

/// Settings of a serve the runner starts, on a serve already running, were accepted and ignored (a
/// `/bin/false` hold wrapper still gave PASS): each is refused at its line, saying why.
#[test]
fn settings_a_url_serve_never_uses_are_refused() {
    let url = url_gate();
    accepted(&url);
    for (line, key, says) in [
        ("port = 9000", "serve.port", "the port is the url's"),
        ("host = \"0.0.0.0\"", "serve.host", "the host is the url's"),
        (
            "stop_grace_s = 3",
            "serve.stop_grace_s",
            "never stops a serve it did not start",
        ),
    ] {
        let t = url.replace("[request]", &format!("{line}\n[request]"));
        refused(&t, line, key, says);
    }
    let t = format!("{url}[hold]\ncommand = [\"/bin/false\"]\n");
    refused(
        &t,
        "command = [\"/bin/false\"]",
        "hold.command",
        "the wrapper would never run",
    );
    // A lock or a ticket holds the device whatever starts the serve.
    accepted(&format!(
        "{url}[hold]\nlock = \"/tmp/servegate-test.lock\"\n"
    ));
    // On a command serve the same settings act.
    accepted(&BASE.replace("[request]", "port = 9000\nstop_grace_s = 3\n[request]"));
}

/// `[assert.consistency] rule = "exact"` compares token for token: its `top_k` was ignored.
#[test]
fn consistency_top_k_with_the_exact_rule_is_refused() {
    let t = load_gate("concurrency = [1, 4]\nrequests = 10").replace(
        "[assert.errors]\n",
        "[assert.consistency]\nrule = \"exact\"\ntop_k = 3\n",
    );
    refused(
        &t,
        "top_k = 3",
        "assert.consistency.top_k",
        "rule = \"exact\" compares token for token",
    );
    accepted(&t.replace("top_k = 3\n", ""));
}

/// A dataset line's unknown key was dropped (`max_token: 2` ran at the gate's max_tokens), and a bad or missing
/// dataset was only found after the serve started, reported as a serve that never became ready. `check` and
/// `run` refuse the gate (exit 3) naming the dataset's line and the key, before any serve starts.
#[test]
fn a_bad_or_missing_dataset_is_the_gates_error_not_the_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("prompts.jsonl");
    std::fs::write(
        &data,
        "{\"prompt\": \"hi\", \"max_tokens\": 4}\n{\"prompt\": \"yo\", \"max_token\": 2}\n",
    )
    .unwrap();
    let t = load_gate(&format!(
        "concurrency = 2\nrequests = 4\ndataset = \"{}\"",
        data.display()
    ));
    let out = refused(&t, "dataset =", "load.dataset", "unknown field `max_token`");
    assert!(out.contains("did you mean `max_tokens`?"), "{out}");
    assert!(out.contains(&format!("{}:2", data.display())), "{out}");
    std::fs::write(&data, "{\"prompt\": \"hi\", \"max_tokens\": 4}\n").unwrap();
    accepted(&t);
    std::fs::remove_file(&data).unwrap();
    let out = refused(&t, "dataset =", "load.dataset", "prompts.jsonl");
    // The key once, then the file: never "load.dataset: load.dataset ...".
    assert!(!out.contains("load.dataset: load.dataset"), "{out}");
    std::fs::write(&data, "\n").unwrap();
    let out = refused(&t, "dataset =", "load.dataset", "prompts.jsonl: no prompts");
    assert!(!out.contains("load.dataset: load.dataset"), "{out}");
    // `run` refuses it as an invalid spec (3), never "serve never became ready" (4).
    let gate = tmp.path().join("g.toml");
    std::fs::write(&gate, &t).unwrap();
    let o = fixtures::servegate()
        .args(["run", "--quiet", "--runs"])
        .arg(tmp.path().join("runs"))
        .arg(&gate)
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(3), "{all}");
    assert!(
        all.contains("load.dataset") && !all.contains("never became ready"),
        "{all}"
    );
}

/// Specs that could never pass or never fail: per-request assertions on a `[load]` gate (its own run
/// directory holds no request), `[assert.errors] max_rate = 1` (every request may fail), a `requires.env`
/// entry holding `=` (no variable has that name). Each is refused at its line.
#[test]
fn specs_that_can_never_pass_or_never_fail_are_refused() {
    let t = load_gate("concurrency = 2\nrequests = 4").replace(
        "[assert.errors]\n",
        "[assert.errors]\n[assert.rate]\nfloor_tok_s = 5\n",
    );
    refused(
        &t,
        "[assert.rate]",
        "assert.rate",
        "it could never pass here",
    );
    let t = load_gate("concurrency = 2\nrequests = 4")
        .replace("[assert.errors]\n", "[assert.errors]\nmax_rate = 1\n");
    refused(
        &t,
        "max_rate = 1",
        "assert.errors.max_rate",
        "could never fail",
    );
    accepted(&t.replace("max_rate = 1", "max_rate = 0.5"));
    let t = BASE.replace("[serve]", "[requires]\nenv = [\"A=B\"]\n[serve]");
    refused(
        &t,
        "env = [",
        "requires.env",
        "names no environment variable",
    );
    accepted(&BASE.replace("[serve]", "[requires]\nenv = [\"HOME\"]\n[serve]"));
}

/// `blocks = 2` on an interleaved baseline where the exact test needs 6 at the default confidence: every
/// verdict would be INDETERMINATE whatever the serves do. Refused naming the fewest that can decide.
#[test]
fn interleaved_blocks_too_few_to_decide_are_refused() {
    let base = BASE.replace("\"serve.py\", ", "\"serve.py\", \"m\", ");
    let t = format!(
        "{base}[assert.regression]\nmetric = \"decode\"\nmax_drop_pct = 10\nbaseline_serve = {{ command = [\"old\", \"m\", \"--port\", \"{{port}}\"] }}\nblocks = 2\n"
    );
    refused(
        &t,
        "blocks = 2",
        "assert.regression.blocks",
        "the exact test needs at least 6",
    );
    accepted(&t.replace("blocks = 2", "blocks = 6"));
}

/// A url with credentials in it (`user:password@host`) is refused saying why and what to use, and the
/// password is never printed (a fresh-user trial saw it in stderr, the JUnit and the results JSON under a
/// message about the host).
#[test]
fn a_url_with_credentials_is_refused_and_never_echoes_them() {
    let t = with(
        r#"command = ["python3", "serve.py", "--port", "{port}"]"#,
        r#"url = "http://admin:s3cretPW@127.0.0.1:8080""#,
    );
    let out = refused(&t, "url =", "serve.url", "carries credentials");
    assert!(out.contains("api_key_env"), "{out}");
    assert!(!out.contains("s3cretPW") && !out.contains("admin"), "{out}");
    assert!(out.contains("http://***@127.0.0.1:8080"), "{out}");
}

/// A NUL byte the operating system cannot pass to a program: refused by `check` (exit 3, the key named),
/// not found at the spawn (`nul byte found`, exit 4) after `check` said ok.
#[test]
fn nul_bytes_in_the_command_or_its_environment_are_refused() {
    let t = with(r#""serve.py""#, r#""serve\u0000.py""#);
    refused(&t, "command =", "serve.command", "word 2 holds a NUL byte");
    let env = |table: &str| with("[request]", &format!("[serve.env]\n{table}\n[request]"));
    refused(
        &env("OK = \"a\"\n\"BAD\\u0000NAME\" = \"x\""),
        "[serve.env]",
        "serve.env",
        "holds a NUL byte",
    );
    refused(
        &env("LD_X = \"a\\u0000b\""),
        "[serve.env]",
        "serve.env",
        "\"LD_X\": the value holds a NUL byte",
    );
    accepted(&env("LD_X = \"a b\""));
}

/// `[record] what_would_make_it_wrong` is held to the rule a record is (a sentence of four words at least):
/// `check` refuses it, naming the key, rather than `run --record` after the whole run.
#[test]
fn a_record_sentence_a_record_would_refuse_is_refused_by_check() {
    let record = |s: &str| {
        format!("{BASE}[record]\nmodel_name = \"m\"\nweights = \"w\"\ndevice = \"d\"\nroute = \"r\"\nengine = \"e\"\nwhat_would_make_it_wrong = \"{s}\"\n")
    };
    refused(
        &record("it is synthetic"),
        "what_would_make_it_wrong =",
        "record.what_would_make_it_wrong",
        "required, a sentence saying what would make this figure wrong",
    );
    accepted(&record("it is a synthetic serve"));
}
