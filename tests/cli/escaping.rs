//! Nothing a serve or a gate author says reaches the CI's command stream or a terminal raw. A hostile serve
//! (`servegate scripted-serve` playing [`hostile_script`], written beside the gates) puts `::stop-commands::`, `::error::`, `::add-mask::`, `%0A`, CR, LF,
//! ESC, BEL and the legacy `##[error]` in its `/version`, its model list (and its replies' `model`), its
//! replies, its error bodies and its log; a gate author puts control bytes in the model name the serve's
//! command line carries and in a `requires` path. Through
//! `servegate run --github`, `servegate judge`, `servegate inspect` and the gate harness (`cargo test --test
//! gates`-style, with `GITHUB_ACTIONS=true`), every line of stdout and stderr is checked: none begins with `::`
//! but servegate's own annotations, none holds `##[` or a raw control byte, and the hostile text is shown
//! (escaped), not dropped.

use std::path::{Path, PathBuf};
use std::process::Output;

use servegate::replay::scripted::{LogLine, Reply, Script};

use crate::fixtures::root;
use crate::fixtures::{self, Entry};

/// What the hostile serve puts in everything it says: workflow commands, `%0A`, CR, LF, ESC, BEL and the
/// legacy `##[`.
const EVIL: &str =
    "\n::stop-commands::z\r::error::fake%0A::add-mask::k\u{1b}[31m\u{7}##[error]legacy";

/// The hostile serve: `/version` says `1.0.0` or, with `evil_version`, EVIL (the engine release a regression
/// compares); `/v1/models` lists `m` or, with `errors`, EVIL only (the asked model is then not served); every
/// chat reply streams EVIL then ` word` seven times (10 ms to the first, 5 ms apart, `model` EVIL), and with
/// `errors` every other one (the 1st, 3rd...) is HTTP 500 with an OpenAI error body whose message is EVIL;
/// its log (serve.log) says EVIL at start (with bytes that are not UTF-8) and once per chat request.
fn hostile_script(evil_version: bool, errors: bool) -> Script {
    let log = vec![LogLine::err(format!("INFO request {EVIL}"))];
    let stream = Reply {
        first_token_ms: 10.0,
        token_ms: 5.0,
        tokens: std::iter::once(EVIL.to_string())
            .chain(std::iter::repeat_n(" word".to_string(), 7))
            .collect(),
        role_chunk: false,
        usage: false,
        model: Some(EVIL.into()),
        log: log.clone(),
        ..Reply::default()
    };
    let mut s = Script {
        version: Some(if evil_version { EVIL } else { "1.0.0" }.into()),
        models: vec![if errors { EVIL } else { "m" }.into()],
        reply: stream.clone(),
        ..Script::default()
    };
    if errors {
        let error = Reply {
            status: 500,
            body: Some(
                serde_json::json!({"error": {"message": EVIL, "type": "server_error", "code": 500}})
                    .to_string(),
            ),
            log,
            ..Reply::default()
        };
        s.replies = vec![error, stream];
        s.cycle = true;
    }
    // And bytes that are not UTF-8 (`{byte:XX}` is one raw byte).
    s.start.log = vec![LogLine::err(format!(
        "INFO starting {EVIL} {{byte:ff}}{{byte:c3}}{{byte:28}}"
    ))];
    s
}

fn data(name: &str) -> PathBuf {
    root().join("tests/data/escaping").join(name)
}

/// `servegate ARGS` in `cwd`, evidence under `cwd/runs`, no report or GitHub variable inherited.
/// `servegate ARGS` from `cwd`, `SERVEGATE_RUNS` there, in a clean environment (CI's own marker removed with
/// the rest: bless refuses to write where it is set, and this test blesses a baseline).
fn servegate(args: &[&str], cwd: &Path) -> Output {
    fixtures::servegate()
        .args(args)
        .current_dir(cwd)
        .env("SERVEGATE_RUNS", cwd.join("runs"))
        .env("PATH", fixtures::path_env())
        .output()
        .expect("run servegate")
}

/// A scratch directory: the hostile serve's scripts (`hostile-plain.json`, `hostile-evil-version.json`,
/// `hostile-errors.json`, beside `base.toml` and in `gates/`), `base.toml` (the hostile gate's serve and requests on a plain
/// `/version`, judged on a rate it meets, to bless the baseline from) and `gates/` with the two hostile gates.
fn scratch() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let gates = t.path().join("gates");
    std::fs::create_dir(&gates).unwrap();
    for dir in [t.path(), gates.as_path()] {
        for (name, evil_version, errors) in [
            ("plain", false, false),
            ("evil-version", true, false),
            ("errors", false, true),
        ] {
            std::fs::write(
                dir.join(format!("hostile-{name}.json")),
                hostile_script(evil_version, errors).to_json(),
            )
            .unwrap();
        }
    }
    let hostile = std::fs::read_to_string(data("hostile.toml")).unwrap();
    // The baseline run must pass to be blessed: its requests, only a rate it meets.
    let cut = hostile.find("[assert.route]").unwrap();
    std::fs::write(
        t.path().join("base.toml"),
        format!("{}[assert.rate]\nfloor_tok_s = 1.0\n", &hostile[..cut]),
    )
    .unwrap();
    std::fs::write(
        gates.join("hostile.toml"),
        hostile.replace("ver = \"plain\"", "ver = \"evil-version\""),
    )
    .unwrap();
    for g in ["hostile-errors.toml", "hostile-requires.toml"] {
        std::fs::copy(data(g), gates.join(g)).unwrap();
    }
    t
}

/// The annotations servegate itself writes (sinks/github.rs).
fn servegate_annotation(line: &str) -> bool {
    line.starts_with("::error file=")
        || line.starts_with("::warning file=")
        || line.starts_with("::notice title=servegate::")
}

/// Every line of `text` is safe for a CI log: it begins with `::` only as one of servegate's annotations,
/// holds no `##[` (the runner's legacy command form, read anywhere in a line) and no control byte but TAB.
fn assert_safe(what: &str, text: &str) {
    for (i, line) in text.split('\n').enumerate() {
        let t = line.trim_start();
        assert!(
            !t.starts_with("::") || servegate_annotation(t),
            "{what} line {}: a workflow command servegate did not write: {line:?}\n{text}",
            i + 1
        );
        assert!(
            !line.contains("##["),
            "{what} line {}: legacy workflow command: {line:?}",
            i + 1
        );
        assert!(
            !line.chars().any(|c| c.is_control() && c != '\t'),
            "{what} line {}: raw control byte: {line:?}",
            i + 1
        );
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The run directory of `gate` under `runs/`, the newest.
fn last_run(cwd: &Path, gate: &str) -> PathBuf {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(cwd.join("runs").join(gate))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    runs.pop().unwrap()
}

/// Blesses the plain-version run of the hostile gate as its stored baseline, so the hostile run's
/// regression compares its `/version` with the baseline's.
fn bless_baseline(cwd: &Path) {
    let o = servegate(&["run", "-q", "base.toml"], cwd);
    assert_safe("baseline run stdout", &stdout(&o));
    let run = last_run(cwd, "hostile");
    let o = servegate(
        &[
            "bless",
            "base.toml",
            "--baseline",
            run.to_str().unwrap(),
            "--accept",
        ],
        cwd,
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(cwd.join("data/baselines/hostile").is_dir());
}

#[test]
fn a_hostile_serve_cannot_write_a_workflow_command_or_a_control_byte() {
    let t = scratch();
    let cwd = t.path();
    bless_baseline(cwd);
    let o = servegate(
        &[
            "run",
            "--github",
            "gates/hostile.toml",
            "gates/hostile-errors.toml",
            "gates/hostile-requires.toml",
        ],
        cwd,
    );
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert_safe("run stdout", &out);
    assert_safe("run stderr", &err);
    // servegate's own annotations are there (a serve's `::stop-commands::` would have switched them off).
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error file=gates/hostile.toml,")
                && l.contains("title=hostile%3A%3Arate::")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error file=gates/hostile-errors.toml,")),
        "{out}"
    );
    // Inside an annotation, `%0A` from the serve stays text (`%250A`), never a line break.
    let annotations: Vec<&str> = out.lines().filter(|l| l.starts_with("::")).collect();
    assert!(
        annotations.iter().all(|l| !l.contains("fake%0A"))
            && annotations.iter().any(|l| l.contains("fake%250A")),
        "{out}"
    );
    // The hostile text is shown, escaped, not dropped: the reply quoted by known_answer, the serve's error body
    // quoted by content, the model list, the version on stderr, the gate author's model on the command line.
    let verdict = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} verdict: {out}"))
            .to_string()
    };
    assert!(
        verdict("known_answer").contains("::stop-commands::z"),
        "{out}"
    );
    assert!(verdict("route").contains("add-mask"), "{out}");
    assert!(out.contains("::error::fake"), "{out}");
    assert!(
        err.contains("hostile-evil-version.json") && err.contains("::stop-commands::z"),
        "{err}"
    );
    assert!(
        err.contains("m\\u{1b}]0;title\\u{7}\\r::error::gate-author"),
        "{err}"
    );
    assert!(
        out.contains(
            "IGNORED requires: path /nonexistent\\n::error::from-a-path\\u{1b}[31m\\u{7}##\\[error]x"
        ),
        "{out}"
    );
    // The same evidence re-judged says it the same safe way.
    for gate in ["hostile", "hostile-errors"] {
        let run = last_run(cwd, gate);
        let o = servegate(&["judge", run.to_str().unwrap(), "--github"], cwd);
        assert_safe("judge stdout", &stdout(&o));
        assert_safe("judge stderr", &stderr(&o));
        assert!(
            stdout(&o).lines().any(|l| l.starts_with("::error file=")),
            "{}",
            stdout(&o)
        );
    }
}

#[test]
fn inspect_prints_a_hostile_reply_as_json_that_holds_no_command_and_no_raw_byte() {
    let t = tempfile::tempdir().unwrap();
    let evil = "\n::stop-commands::z\r::error::x%0A\u{1b}[31m\u{7}\u{9b}2J\u{7f}##[error]y";
    let chunk = |content: &str| {
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}],
                           "model": evil})
        .to_string()
    };
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(evil),
        chunk(" Paris"),
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    );
    let file = t.path().join("reply.sse");
    std::fs::write(&file, body).unwrap();
    let o = servegate(&["inspect", file.to_str().unwrap()], t.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_safe("inspect stdout", &out);
    // Still JSON, with the text the serve sent.
    let v: serde_json::Value = serde_json::from_str(&out).expect("inspect prints JSON");
    assert!(v.to_string().contains("stop-commands"), "{out}");
    assert!(
        serde_json::to_string(&v).unwrap().contains("\u{9b}2J"),
        "the value is unchanged, only written escaped: {out}"
    );
    // The serve's model list (`--models`, a saved /v1/models answer) naming a hostile model, quoted in the
    // identity problem.
    let models = t.path().join("models.json");
    std::fs::write(
        &models,
        serde_json::json!({"object": "list", "data": [{"id": evil, "object": "model"}]})
            .to_string(),
    )
    .unwrap();
    let o = servegate(
        &[
            "inspect",
            file.to_str().unwrap(),
            "--model",
            "m",
            "--models",
            models.to_str().unwrap(),
        ],
        t.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_safe("inspect --models stdout", &stdout(&o));
    assert!(stdout(&o).contains("stop-commands"), "{}", stdout(&o));
    // A log file (`inspect x.log`) likewise.
    let log = t.path().join("serve.log");
    std::fs::write(&log, format!("INFO {evil}\nINFO ready\n")).unwrap();
    let o = servegate(
        &[
            "inspect",
            log.to_str().unwrap(),
            "--require",
            "stop-commands",
        ],
        t.path(),
    );
    assert_safe("inspect log stdout", &stdout(&o));
    assert_safe("inspect log stderr", &stderr(&o));
}

#[test]
fn the_gate_harness_prints_no_serve_text_raw() {
    let t = scratch();
    let cwd = t.path();
    bless_baseline(cwd);
    let o = fixtures::harness(Entry::Code, &["--color=never"])
        .current_dir(cwd)
        .env("SERVEGATE_GATES", cwd.join("gates"))
        .env("SERVEGATE_RUNS", cwd.join("runs"))
        .env("PATH", fixtures::path_env())
        .env("SERVEGATE_VERBOSE", "1")
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(101), "{out}{err}");
    assert_safe("harness stdout", &out);
    assert_safe("harness stderr", &err);
    assert!(out.contains("gate report:"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error file=") && l.contains("hostile%3A%3Arate")),
        "{out}"
    );
    // libtest's failure text quotes the verdict, and its ignored line the gate author's path: escaped too.
    assert!(out.contains("::stop-commands::z"), "{out}");
    assert!(out.contains("::error::from-a-path"), "{out}");
}
