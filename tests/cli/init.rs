//! `servegate init` against scripted serves: a llama.cpp-like serve it starts gives a gate that `check`s
//! clean and `run`s PASS; an existing file is never overwritten; a URL that is not a serve, a port where
//! nothing answers and a log that names no route write nothing and exit non-zero; a hostile model name
//! round-trips through the written TOML and reaches no terminal raw.

use std::path::Path;
use std::process::Child;

use servegate::replay::scripted::{LogLine, Reply, Script};

use crate::fixtures::{self, Out, Project};

/// A llama.cpp look-alike: `/props` with `build_info` (the engine's detection), its system_info line at
/// start, and every chat reply 16 words paced 40 ms apart (a pace a busy machine stretches by a few percent
/// at most), naming Paris, with llama.cpp's finish, usage and `[DONE]`.
fn llama_like(model: &str) -> Script {
    let mut s = fixtures::llama_script();
    s.models = vec![model.to_string()];
    s.props =
        Some(serde_json::json!({"build_info": "b4242-init", "default_generation_settings": {}}));
    s.start.log.push(LogLine::err(
        "system_info: n_threads = 1 (n_threads_batch = 1) / 2 | CPU : SSE3 = 1 | AVX2 = 1 |",
    ));
    s.reply = Reply {
        tokens: fixtures::word_tokens(
            "The capital of France is Paris, and the sky is blue because air scatters blue light most.",
        ),
        role_chunk: true,
        first_token_ms: 30.0,
        token_ms: 40.0,
        finish_reason: Some("stop".into()),
        usage: true,
        prompt_tokens: 20,
        done: true,
        ..Reply::default()
    };
    s
}

/// `script`'s argv for `servegate init -- ...`: the gate's `{host}` and `{port}`, its own braces doubled.
fn init_command(script: &Script) -> Vec<String> {
    let mut argv = fixtures::scripted_argv(script, "{host}", "{port}");
    let last = argv.len() - 1;
    argv[last] = argv[last].replace('{', "{{").replace('}', "}}");
    argv
}

/// A scripted serve started here on a free port, its output appended to `log`; killed when dropped.
struct Running {
    child: Child,
    port: u16,
}

impl Running {
    fn start(script: &Script, log: &Path) -> Running {
        let port = servegate::io::port::free_port("127.0.0.1").unwrap();
        let argv = fixtures::scripted_argv(script, "127.0.0.1", &port.to_string());
        let f = std::fs::File::create(log).unwrap();
        let child = fixtures::servegate()
            .args(&argv[1..])
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap();
        // Ready when /health says 200.
        let http = reqwest::blocking::Client::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if http
                .get(format!("http://127.0.0.1:{port}/health"))
                .send()
                .is_ok_and(|r| r.status() == 200)
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        Running { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /v1/models` answered 500 `Internal Server Error`, as `transformers serve` 5.19.0 offline does (it
/// scans the hub cache; tests/data/runtimes/transformers/v1_models.*).
fn models_500() -> servegate::replay::scripted::Route {
    servegate::replay::scripted::Route {
        method: Some("GET".into()),
        path: "/v1/models".into(),
        status: 500,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: "Internal Server Error".into(),
        delay_ms: 0.0,
    }
}

fn init(p: &Project, args: &[&str]) -> Out {
    Out::of(p.servegate().arg("init").args(args))
}

/// [`init`] writing `gates/NAME.toml` with a first-token limit, which needs five first tokens the client
/// timed: on a busy machine init says which it could not time and why, and it runs again
/// (fixtures::timed_by_the_client), the gate file removed first.
fn init_timed(p: &Project, args: &[&str], name: &str) -> Out {
    let file = p.path().join(format!("gates/{name}.toml"));
    fixtures::timed_by_the_client(
        3,
        || {
            let _ = std::fs::remove_file(&file);
            init(p, args)
        },
        |_| std::fs::read_to_string(&file).is_ok_and(|g| g.contains("limit_ms = ")),
        |o| o.all(),
    )
}

#[test]
fn init_on_a_started_llama_like_serve_writes_a_gate_that_checks_clean_and_runs_pass() {
    let p = Project::new();
    let argv = init_command(&llama_like("fake-model"));
    let mut args = vec!["--name", "fake"];
    args.push("--");
    args.extend(argv.iter().map(String::as_str));
    let out = init_timed(&p, &args, "fake");
    assert_eq!(out.code, 0, "{}", out.all());
    let gate = std::fs::read_to_string(p.path().join("gates/fake.toml")).unwrap();
    for want in [
        "engine = \"llama.cpp\"",
        "repeat_penalty = 1.0",
        "[assert.route]",
        "n_threads = 1",
        "floor_tok_s = ",
        "limit_ms = ",
        "tok/s median (n=9)",
        "floor = lower bound - 50 %",
        "[assert.known_answer]",
        "expect_model = \"fake-model\"",
        "{port}",
        // The wait written from init's own measurement (a fast serve: the 120 s least).
        "ready_timeout_s = 120     # model load included: it answered after ",
    ] {
        assert!(gate.contains(want), "{want:?} missing from:\n{gate}");
    }
    assert!(
        out.stdout.contains("wrote gates/fake.toml"),
        "{}",
        out.all()
    );
    let check = Out::of(p.servegate().args(["check", "gates/fake.toml"]));
    assert_eq!(check.code, 0, "{}\n{gate}", check.all());
    let run = Out::of(p.servegate().args(["run", "gates/fake.toml"]));
    assert_eq!(run.code, 0, "{}\n{gate}", run.all());
    for t in [
        "route PASS",
        "rate PASS",
        "first_token PASS",
        "known_answer PASS",
        "contract.usage PASS",
    ] {
        assert!(run.stdout.contains(t), "{t}: {}", run.all());
    }
    // The tightening step the gate's comments and docs/getting-started.md give: bless the passing run. Its
    // [contract] checks are re-judged from the run's `contract/` as `servegate judge` does (they were refused
    // for "no contract evidence" when bless judged without it).
    let ev = fixtures::evidence_dir(&run.stdout);
    let ev = ev.to_str().unwrap();
    let bless = Out::of(
        p.servegate()
            .args(["bless", "--floor", ev, "gates/fake.toml"]),
    );
    assert_eq!(bless.code, 0, "{}", bless.all());
    assert!(bless.stdout.contains("+floor_tok_s = "), "{}", bless.all());
    let window = Out::of(
        p.servegate()
            .args(["bless", "gates/fake.toml", "--baseline", ev]),
    );
    assert_eq!(window.code, 0, "{}", window.all());
    // The command the gate's comment names, as written there, with the run as both routes: it parses (the
    // gate file included: it left it out, exit 2), both runs are taken as evidence (neither refused), and only
    // then is no floor derived, one run being no slower than itself.
    let comments: Vec<&str> = gate
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .map(str::trim)
        .collect();
    let comments = comments.join(" ");
    let at = comments
        .find("`servegate bless ")
        .unwrap_or_else(|| panic!("no bless command in the comments of:\n{gate}"));
    let cmd = comments[at + 1..].split('`').next().unwrap();
    let argv: Vec<&str> = cmd
        .split_whitespace()
        .skip(1)
        .map(|a| if a.ends_with("_RUN") { ev } else { a })
        .collect();
    assert!(argv.contains(&"--slow"), "{cmd}");
    let tighten = Out::of(p.servegate().args(&argv));
    assert_eq!(
        tighten.code,
        servegate::error::exit::ASSERTION_FAILED,
        "{cmd}: {}",
        tighten.all()
    );
    assert!(
        tighten
            .stderr
            .contains("no floor derived: the runs overlap"),
        "{cmd}: {}",
        tighten.all()
    );
}

#[test]
fn an_out_of_range_flag_is_a_usage_error_naming_that_flag_and_its_value() {
    let p = Project::new();
    for (flag, value) in [
        ("--max-tokens", "0"),
        ("--max-tokens", "4097"),
        ("--repeats", "0"),
        ("--repeats", "21"),
        ("--headroom-pct", "150"),
        ("--headroom-pct", "nan"),
        ("--headroom-pct", "-1"),
    ] {
        let out = init(
            &p,
            &["--url", "http://127.0.0.1:9", &format!("{flag}={value}")],
        );
        assert_eq!(out.code, 2, "{flag} {value}: {}", out.all());
        assert!(
            out.stderr.contains(flag) && out.stderr.contains(&format!("'{value}'")),
            "{flag} {value}: {}",
            out.all()
        );
        // Only the bad flag is named, not every range at once.
        let others = ["--max-tokens", "--repeats", "--headroom-pct"];
        for other in others.iter().filter(|o| **o != flag) {
            assert!(!out.stderr.contains(other), "{flag}: {}", out.all());
        }
    }
    assert!(
        !p.path().join("gates").exists()
            || std::fs::read_dir(p.path().join("gates"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn init_never_overwrites_a_file_without_force() {
    let p = Project::new();
    let existing = p.write("gates/mine.toml", "# my own gate\n");
    let out = init(&p, &["--name", "mine", "--url", "http://127.0.0.1:9"]);
    assert_eq!(out.code, 2, "{}", out.all());
    assert!(
        out.stderr.contains("exists: not overwritten"),
        "{}",
        out.all()
    );
    assert!(out.stderr.contains("--force"), "{}", out.all());
    assert_eq!(
        std::fs::read_to_string(existing).unwrap(),
        "# my own gate\n"
    );
}

#[test]
fn a_url_that_is_not_a_serve_or_answers_nothing_writes_nothing() {
    let p = Project::new();
    // A web server that is not a serve: every path 200 with an HTML page.
    let url = fixtures::canned_http(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nserver: nginx\r\ncontent-length: 13\r\nconnection: close\r\n\r\n<html></html>",
    );
    let out = init(&p, &["--url", &url]);
    assert_eq!(out.code, 4, "{}", out.all());
    assert!(
        out.stdout.contains("found: GET /health 200"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout
            .contains("not found: /v1/models gave no OpenAI model list"),
        "{}",
        out.all()
    );
    assert!(
        out.stderr
            .contains("does not answer as an OpenAI-compatible serve"),
        "{}",
        out.all()
    );
    assert!(out.stderr.contains("nothing written"), "{}", out.all());
    assert!(
        !out.all().contains('\u{1b}'),
        "a raw escape reached the terminal: {}",
        out.all()
    );
    assert!(!p.path().join("gates").exists());

    // Nothing listening at all.
    let free = servegate::io::port::free_port("127.0.0.1").unwrap();
    let out = init(&p, &["--url", &format!("http://127.0.0.1:{free}")]);
    assert_eq!(out.code, 4, "{}", out.all());
    assert!(out.stderr.contains("nothing answers at"), "{}", out.all());
    assert!(!p.path().join("gates").exists());
}

#[test]
fn a_log_that_names_no_route_writes_nothing() {
    let p = Project::new();
    let mut script = llama_like("fake-model");
    script.start.log.clear();
    script.request_log.clear();
    script.health.ready_log.clear();
    let log = p.path().join("serve.log");
    let serve = Running::start(&script, &log);
    let out = init(&p, &["--url", &serve.url(), "--log", log.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stdout.contains("found: engine llama.cpp"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("not found: the route: the log"),
        "{}",
        out.all()
    );
    assert!(out.stderr.contains("--no-route"), "{}", out.all());
    assert!(!p.path().join("gates").exists());
}

#[test]
fn a_hostile_model_name_round_trips_and_is_never_printed_raw() {
    let p = Project::new();
    let name = "evil\"name'\n[serve]\nurl = \"http://x\" # \u{1b}[31m{port}\u{202e}";
    let mut script = llama_like(name);
    // Route evidence per request: what a url gate reads (the log's bytes written during its run).
    script.request_log = vec![LogLine::err(
        "slot launch: task {n} | backend CPU | n_threads = 1",
    )];
    let log = p.path().join("serve.log");
    let serve = Running::start(&script, &log);
    let out = init(
        &p,
        &[
            "--name",
            "evil",
            "--url",
            &serve.url(),
            "--log",
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(
        !out.all().contains('\u{1b}') && !out.all().contains('\u{202e}'),
        "{}",
        out.all()
    );
    let path = p.path().join("gates/evil.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text}"
    );
    let gate = servegate::spec::load(&path).unwrap();
    assert_eq!(gate.request.served_model, name);
    assert_eq!(gate.serve.expect_model.as_deref(), Some(name));
    assert!(matches!(
        gate.serve.mode,
        servegate::spec::ServeMode::Url(_)
    ));
    let run = Out::of(p.servegate().args(["run", "gates/evil.toml"]));
    assert_eq!(run.code, 0, "{}\n{text}", run.all());
    assert!(run.stdout.contains("route PASS"), "{}", run.all());
    drop(serve);
}

/// A serve that answers with a header name the HTTP client refuses (a space and an escape in it) did answer:
/// init says so, naming the line and the name escaped, never "nothing answers".
#[test]
fn a_serve_answering_an_invalid_header_is_named_not_called_silent() {
    let p = Project::new();
    let url = fixtures::canned_http(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nX Served\x1b[31m: 1\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
    );
    let out = init(&p, &["--url", &url]);
    assert_eq!(out.code, 4, "{}", out.all());
    assert!(!out.stderr.contains("nothing answers"), "{}", out.all());
    assert!(
        out.stderr
            .contains("answered with an invalid response head"),
        "{}",
        out.all()
    );
    assert!(
        out.all()
            .contains(r#"/health: header line 3 has an invalid name "X Served\u{1b}[31m""#),
        "{}",
        out.all()
    );
    assert!(!out.all().contains('\u{1b}'), "{}", out.all());
    assert!(!p.path().join("gates").exists());
}

#[test]
fn a_model_list_that_fails_with_a_5xx_asks_for_model_and_with_it_writes_a_gate_that_runs_pass() {
    // `transformers serve` 5.19.0 offline answers /v1/models 500 (it scans the hub cache) and serves the
    // model it is asked for by name (tests/data/runtimes/transformers/v1_models.*).
    let p = Project::new();
    let mut script = llama_like("fake-model");
    script.routes = vec![models_500()];
    script.request_log = vec![LogLine::err(
        "slot launch: task {n} | backend CPU | n_threads = 1",
    )];
    let log = p.path().join("serve.log");
    let serve = Running::start(&script, &log);
    let base = [
        "--name",
        "five",
        "--url",
        &serve.url(),
        "--log",
        log.to_str().unwrap(),
    ];
    let out = init(&p, &base);
    assert_eq!(out.code, 4, "{}", out.all());
    assert!(
        out.stderr.contains("(/v1/models: 500)") && out.stderr.contains("pass --model NAME"),
        "{}",
        out.all()
    );
    assert!(!p.path().join("gates").exists());
    let mut args = base.to_vec();
    args.extend(["--model", "fake-model"]);
    let out = init(&p, &args);
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(
        out.stdout.contains("/v1/models answered 500"),
        "said, not hidden: {}",
        out.all()
    );
    let text = std::fs::read_to_string(p.path().join("gates/five.toml")).unwrap();
    assert!(text.contains("model = \"fake-model\""), "{text}");
    assert!(
        !text.contains("expect_model"),
        "not listed, not expected: {text}"
    );
    // The log beside gates/ is written relative to the gate, so the gate survives a commit and a clone.
    assert!(
        text.contains("log_file = \"{gate_dir}/../serve.log\""),
        "{text}"
    );
    let run = Out::of(p.servegate().args(["run", "gates/five.toml"]));
    assert_eq!(run.code, 0, "{}\n{text}", run.all());
    drop(serve);
}

#[test]
fn a_serve_that_never_answers_writes_nothing() {
    let p = Project::new();
    // Accepts connections and never says a byte: each question times out (5 s), two are asked.
    let url = fixtures::silent_http();
    let out = init(&p, &["--url", &url]);
    assert_eq!(out.code, 4, "{}", out.all());
    assert!(
        out.stdout.contains("not found: an answer at"),
        "{}",
        out.all()
    );
    assert!(out.stderr.contains("nothing answers at"), "{}", out.all());
    assert!(!p.path().join("gates").exists());

    // A started serve that never becomes ready: stopped, nothing written.
    let out = init(
        &p,
        &[
            "--ready-timeout-s",
            "1",
            "--",
            "sh",
            "-c",
            "echo loading; sleep 30",
            "{port}",
        ],
    );
    assert_eq!(out.code, 4, "{}", out.all());
    assert!(out.stderr.contains("never became ready"), "{}", out.all());
    assert!(
        out.stderr.contains(
            "init waited 1 s, --ready-timeout-s: a serve still loading needs a longer wait"
        ),
        "a serve still loading says how to wait longer: {}",
        out.all()
    );
    assert!(
        out.stderr.contains("loading"),
        "the log's end is quoted: {}",
        out.all()
    );
    assert!(!p.path().join("gates").exists());
}

#[test]
fn a_model_list_of_none_or_several_asks_for_model_and_writes_nothing() {
    let p = Project::new();
    for (models, says) in [
        (vec![], "/v1/models lists no model: pass --model NAME"),
        (
            vec!["a".to_string(), "b".to_string()],
            "/v1/models lists several models: pass --model NAME",
        ),
    ] {
        let mut script = llama_like("x");
        script.models = models;
        let log = p.path().join("serve.log");
        let serve = Running::start(&script, &log);
        let out = init(&p, &["--url", &serve.url(), "--log", log.to_str().unwrap()]);
        assert_eq!(out.code, 2, "{}", out.all());
        assert!(out.stderr.contains(says), "{}", out.all());
        assert!(out.stdout.contains("not found: "), "{}", out.all());
        assert!(!p.path().join("gates").exists());
    }
}

#[test]
fn a_started_serve_whose_model_list_fails_is_ready_by_health_and_its_route_line_is_matched_as_a_run_sees_it(
) {
    // `transformers serve` 5.19.0 offline, started by init: /v1/models answers 500 for ever (it scans the
    // hub cache), /health 200 (measured: init waited its whole 600 s on /v1/models before). Its route line
    // names the model by an absolute path, which a run's serve.log holds written public (a path under the
    // checkout relative, under home `~`): the candidate must be made from the line as the run will read it,
    // or the written gate FAILs its own route (measured: "the serve log never says /.../root/\.cache/...").
    let p = Project::new();
    let mut script = llama_like("fake-model");
    script.routes = vec![models_500()];
    let model_path = p.path().join("models/m.gguf");
    script.start.log = vec![LogLine::err(format!(
        "system_info: n_threads = 1 (n_threads_batch = 1) / 2 | CPU : AVX2 = 1 | model {}",
        model_path.display()
    ))];
    let argv = init_command(&script);
    let mut args = vec![
        "--name",
        "lazy",
        "--model",
        "fake-model",
        "--ready-timeout-s",
        "60",
        "--",
    ];
    args.extend(argv.iter().map(String::as_str));
    let out = init_timed(&p, &args, "lazy");
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(
        out.stdout.contains(
            "found: the serve answered /v1/models with 500 Internal Server Error steadily, and /health 200"
        ),
        "{}",
        out.all()
    );
    // The erring path is probed at most every 500 ms until the fallback (io/serve/ready.rs ERRING_POLL_MS):
    // about 7 probes in the steady rule's 3 s, and init's own questions after it. At the 25 ms default it
    // was 100 probes (`transformers serve` logs a traceback for each). Each attempt's serve log counted.
    let logs = p.runs().join("lazy-init");
    let mut counted = 0;
    for e in std::fs::read_dir(&logs).unwrap() {
        // init's started serve's own log (the measured round's directory beside it holds a slice of it).
        let dir = e.unwrap().path();
        if !dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("serve-")
        {
            continue;
        }
        let log = dir.join("serve.log");
        let Ok(text) = std::fs::read_to_string(&log) else {
            continue;
        };
        let probes = text
            .matches("request: GET /v1/models 127.0.0.1 500")
            .count();
        eprintln!(
            "{probes} probes of /v1/models answered 500 in {}",
            log.display()
        );
        assert!(
            (5..=15).contains(&probes),
            "{probes} probes of /v1/models in {}",
            log.display()
        );
        counted += 1;
    }
    assert!(counted >= 1, "no serve.log under {}", logs.display());
    let gate = std::fs::read_to_string(p.path().join("gates/lazy.toml")).unwrap();
    assert!(gate.contains("[assert.route]"), "{gate}");
    let fast = gate
        .lines()
        .find(|l| l.starts_with("fast = "))
        .unwrap_or_else(|| panic!("{gate}"));
    assert!(
        fast.ends_with(r"model models/m\.gguf'"),
        "the route line as a run reads it (relative), not the raw absolute path: {fast}"
    );
    let run = Out::of(p.servegate().args(["run", "gates/lazy.toml"]));
    assert_eq!(run.code, 0, "{}\n{gate}", run.all());
    assert!(run.stdout.contains("route PASS"), "{}", run.all());
}

/// A serve init starts runs with init's environment: the variables that steer an engine (here
/// `HF_HUB_OFFLINE`, `VLLM_TARGET_DEVICE`) are written under `[serve.env]` so the gate starts it the same way
/// where they are unset (a vLLM gate written without `HF_HUB_OFFLINE=1` failed offline in CI); a secret
/// (`HF_TOKEN`) is named in a comment, its value never written; others (`PATH`) are left out.
#[test]
fn init_writes_the_steering_environment_of_the_serve_it_started_and_never_a_secret() {
    let p = Project::new();
    let argv = init_command(&llama_like("fake-model"));
    let mut args = vec!["--name", "envy", "--"];
    args.extend(argv.iter().map(String::as_str));
    let out = Out::of(
        p.servegate()
            .env("HF_HUB_OFFLINE", "1")
            .env("VLLM_TARGET_DEVICE", "cpu")
            .env("HF_TOKEN", "hf_do_not_write_me")
            .arg("init")
            .args(&args),
    );
    assert_eq!(out.code, 0, "{}", out.all());
    let gate = std::fs::read_to_string(p.path().join("gates/envy.toml")).unwrap();
    // (Other steering variables of the test's own environment may sit between them.)
    let env_table = &gate[gate.find("[serve.env]\n").expect(&gate)..];
    let env_table = &env_table[..env_table.find("\n\n").unwrap_or(env_table.len())];
    for line in ["HF_HUB_OFFLINE = \"1\"", "VLLM_TARGET_DEVICE = \"cpu\""] {
        assert!(env_table.lines().any(|l| l == line), "{line}: {gate}");
    }
    assert!(gate.contains("not written (secrets): HF_TOKEN."), "{gate}");
    assert!(!gate.contains("hf_do_not_write_me"), "{gate}");
    assert!(!out.all().contains("hf_do_not_write_me"), "{}", out.all());
    let spec = servegate::spec::load(&p.path().join("gates/envy.toml")).unwrap();
    assert_eq!(
        spec.serve.env.get("HF_HUB_OFFLINE").map(String::as_str),
        Some("1")
    );
    let check = Out::of(p.servegate().args(["check", "gates/envy.toml"]));
    assert_eq!(check.code, 0, "{}\n{gate}", check.all());
}

/// A `--url` with `user:password@` is refused before anything is probed, as a gate's `serve.url` is, and the
/// password is never echoed (it was, in both "not found" lines).
#[test]
fn init_refuses_a_url_with_credentials_without_echoing_them() {
    let p = Project::new();
    let out = init(
        &p,
        &[
            "--url",
            "http://alice:s3cretPW@127.0.0.1:9/",
            "--name",
            "cred",
        ],
    );
    assert_eq!(out.code, servegate::error::exit::USAGE, "{}", out.all());
    assert!(out.stderr.contains("carries credentials"), "{}", out.all());
    assert!(
        out.all().contains("http://***@127.0.0.1:9"),
        "{}",
        out.all()
    );
    assert!(!out.all().contains("s3cretPW"), "{}", out.all());
    assert!(!p.path().join("gates/cred.toml").exists());
}

/// docs/getting-started.md's `servegate init -- scripts/SERVE ...`: the program, a path under the checkout
/// holding `gates/`, is written `{gate_dir}/../scripts/SERVE`, so the gate checks clean and starts its serve
/// from any working directory; `check` warns of the relative word init wrote before.
#[test]
fn a_command_path_relative_to_the_checkout_is_written_from_gate_dir_and_check_warns_of_a_relative_one(
) {
    // docs/getting-started.md's recipe: `servegate init -- scripts/SERVE ...` in the checkout holding gates/.
    let p = Project::new();
    let script = p.write(
        "scripts/serve",
        &format!("#!/bin/sh\nexec '{}' \"$@\"\n", fixtures::BIN),
    );
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut argv = init_command(&llama_like("rel-model"));
    argv[0] = "scripts/serve".into();
    let mut args = vec!["--name", "rel", "--no-route", "--"];
    args.extend(argv.iter().map(String::as_str));
    let out = init(&p, &args);
    assert_eq!(out.code, 0, "{}", out.all());
    let file = p.path().join("gates/rel.toml");
    let gate = std::fs::read_to_string(&file).unwrap();
    assert!(
        gate.contains("command = [\"{gate_dir}/../scripts/serve\", "),
        "{gate}"
    );
    // From another working directory the gate checks clean and its serve starts.
    let elsewhere = tempfile::tempdir().unwrap();
    let gate_arg = file.to_str().unwrap();
    let check = Out::of(
        fixtures::servegate()
            .current_dir(elsewhere.path())
            .args(["check", gate_arg]),
    );
    assert_eq!(check.code, 0, "{}", check.all());
    assert!(!check.stdout.contains("warning"), "{}", check.all());
    let run = Out::of(
        fixtures::servegate()
            .current_dir(elsewhere.path())
            .env("SERVEGATE_RUNS", p.runs())
            .args(["run", gate_arg]),
    );
    assert!(!run.all().contains("spawn_failed"), "{}", run.all());
    assert_ne!(
        run.code,
        servegate::error::exit::SERVE_NOT_READY,
        "{}",
        run.all()
    );
    // The same gate with the relative word (what init wrote before): check warns, naming the fix.
    std::fs::write(
        &file,
        gate.replace("\"{gate_dir}/../scripts/serve\"", "\"scripts/serve\""),
    )
    .unwrap();
    let check = Out::of(
        fixtures::servegate()
            .current_dir(elsewhere.path())
            .args(["check", gate_arg]),
    );
    assert_eq!(check.code, 0, "{}", check.all());
    assert!(
        check.stdout.contains(
            "warning: serve.command \"scripts/serve\": a relative path, found only from the working directory"
        ) && check.stdout.contains("\"{gate_dir}/../scripts/serve\""),
        "{}",
        check.all()
    );
}

/// `--model` naming a model the serve does not list: the gate is written without `expect_model`, and the
/// summary says so under `-q` too (the run's `model_not_listed` note is a progress line `-q` hides), the
/// name and the list escaped.
#[test]
fn a_model_the_serve_does_not_list_is_a_not_found_line_even_under_quiet() {
    let p = Project::new();
    let mut script = llama_like("synthetic");
    script.models = vec!["synthetic".into(), "replay".into()];
    let serve = Running::start(&script, &p.path().join("serve.log"));
    let out = init(
        &p,
        &[
            "-q",
            "--name",
            "ok1",
            "--model",
            "syn\u{1b}[31m",
            "--no-route",
            "--url",
            &serve.url(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(!out.all().contains('\u{1b}'), "{}", out.all());
    assert!(
        out.stdout.contains(
            "not found: \"syn\\u{1b}[31m\" in /v1/models: it lists [\"synthetic\", \"replay\"]; the gate is written without expect_model"
        ),
        "{}",
        out.all()
    );
    assert!(!out.stderr.contains("init: "), "{}", out.all());
    let gate = servegate::spec::load(&p.path().join("gates/ok1.toml")).unwrap();
    assert_eq!(gate.serve.expect_model, None);
    drop(serve);
}

/// A serve that does not give the known answer: the gate has no `[assert.known_answer]`, so its prompt is
/// timed as the others are, and the `repeats` comment counts the four (n = 3 x 4 = 12, what the run plans).
#[test]
fn the_repeats_comment_counts_the_known_answer_prompt_when_it_is_timed() {
    let p = Project::new();
    let mut script = llama_like("synthetic");
    script.reply.tokens =
        fixtures::word_tokens("The sky is blue because air scatters blue light most.");
    let serve = Running::start(&script, &p.path().join("serve.log"));
    let out = init(
        &p,
        &[
            "--name",
            "syn",
            "--model",
            "synthetic",
            "--no-route",
            "--url",
            &serve.url(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.all());
    let file = p.path().join("gates/syn.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("\n[assert.known_answer]\n"), "{text}");
    let gate = servegate::spec::load(&file).unwrap();
    let timed = gate.request.prompts.len() - gate.request.untimed.len();
    assert_eq!(timed, 4, "{text}");
    assert!(
        text.contains("# n = 3 x 4 timed prompts = 12 timed replies"),
        "{text}"
    );
    drop(serve);
}

/// `--force --out DIR` where DIR is a directory: the write fails after the measured round, and the error
/// says "(nothing written)" once.
#[test]
fn a_write_that_fails_says_nothing_written_once() {
    let p = Project::new();
    let serve = Running::start(&llama_like("m1"), &p.path().join("serve.log"));
    std::fs::create_dir_all(p.path().join("adir")).unwrap();
    let out = init(
        &p,
        &[
            "--name",
            "w",
            "--force",
            "--out",
            "adir",
            "--no-route",
            "--url",
            &serve.url(),
        ],
    );
    assert_eq!(
        out.code,
        servegate::error::exit::EVIDENCE_ERROR,
        "{}",
        out.all()
    );
    assert_eq!(
        out.stderr.matches("(nothing written)").count(),
        1,
        "{}",
        out.all()
    );
    assert!(p.path().join("adir").is_dir());
    drop(serve);
}
