//! `[load] driver = "vllm-bench"`, `"aiperf"` and `"guidellm"`: the gate's keys and refusals, and the
//! command lines (GuideLLM: the scenario file) servegate builds for vLLM's `vllm bench serve`, AIPerf's
//! `aiperf profile` and GuideLLM's `guidellm run` from a gate's point (closed loop, open loop), without
//! running them (the runs against the synthetic serve are tests/cli/load_vllm_bench.rs).

use std::path::{Path, PathBuf};

use servegate::io::load_client::Target;
use servegate::io::vllm_bench::{argv, prompts_jsonl, BenchPlan, RESULT_FILE};
use servegate::spec::{self, load::Driver, load::Point};

/// A gate with `request` lines in `[request]` and `load` as its `[load]`.
fn text_with(request: &str, load: &str) -> String {
    format!(
        "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"a\", \"b\"]\n{request}\n[load]\n{load}\n[assert.errors]\nmax_rate = 0.0\n"
    )
}

fn parse_with(request: &str, load: &str) -> Result<spec::GateSpec, String> {
    let text = text_with(request, load);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.toml");
    spec::parse(&file, &text, &spec::Context::for_file(&file)).map_err(|e| e.to_string())
}

fn parse(load: &str) -> Result<spec::GateSpec, String> {
    parse_with("", load)
}

/// The value after `flag` in `a` (None: the flag is absent).
fn after<'a>(a: &'a [String], flag: &str) -> Option<&'a str> {
    a.iter()
        .position(|x| x == flag)
        .and_then(|i| a.get(i + 1))
        .map(String::as_str)
}

/// The plan a gate's point gives against a serve at `url`.
fn plan_of(g: &spec::GateSpec, point: Point, url: &str) -> BenchPlan {
    let load = g.load.clone().unwrap();
    let target = Target::parse(url, None).unwrap();
    let n = load.spec.requests.unwrap() as usize;
    servegate::run::load_tool::plan(g, &load, point, n, &target)
}

/// A `vllm-bench` gate implies the vLLM runtime provisioned (skipped naming scripts/provision-vllm.sh
/// where missing); the refusals say why: a duration (the bench sends a number of prompts), constant
/// arrivals (its open loop is a gamma process), `client_cpus` (the tool sends), a Locust key.
#[test]
fn the_vllm_bench_driver_keys_and_refusals() {
    let g = parse("concurrency = 2\nrequests = 4\ndriver = \"vllm-bench\"").unwrap();
    assert_eq!(g.requires.provisioned, vec!["vllm".to_string()]);
    assert!(g.requires.provisioned_markers[0].ends_with("provisioned/vllm"));
    assert_eq!(g.load.unwrap().spec.driver, Driver::VllmBench);
    let g = parse("rate_rps = [1.0, 4.0]\nrequests = 4\ndriver = \"vllm-bench\"").unwrap();
    assert_eq!(g.load.unwrap().spec.driver, Driver::VllmBench);
    let cases = [
        (
            "concurrency = 2\nduration_s = 10\ndriver = \"vllm-bench\"",
            "not a duration",
        ),
        (
            "rate_rps = 2.0\narrival = \"constant\"\nrequests = 4\ndriver = \"vllm-bench\"",
            "no constant gaps",
        ),
        (
            "concurrency = 2\nrequests = 4\nclient_cpus = 1\ndriver = \"vllm-bench\"",
            "vllm bench serve sends",
        ),
        (
            "concurrency = 2\nrequests = 4\nlocust_workers = 2\ndriver = \"vllm-bench\"",
            "is a key of `driver = \"locust\"`",
        ),
    ];
    for (load, want) in cases {
        let e = parse(load).unwrap_err();
        assert!(e.contains(want), "{load}: {e}");
    }
}

/// A closed-loop point: `--max-concurrency N` with `--num-prompts` = the point's requests and the
/// warmups, the gate's served model at the serve's base URL (its path prefix kept), the gate's prompts as
/// a custom dataset in order with their `max_tokens`, no ready check, the result saved with per-request
/// detail where servegate reads it; no rate, no `--ignore-eos` the gate did not ask for.
#[test]
fn a_closed_loop_point_becomes_max_concurrency_and_num_prompts() {
    let g = parse_with(
        "served_model = \"smollm2\"",
        "concurrency = [1, 4]\nrequests = 24\nwarmup_requests = 2\nseed = 7\ndriver = \"vllm-bench\"",
    )
    .unwrap();
    let p = plan_of(&g, Point::Concurrency(4), "http://127.0.0.1:8080/openai");
    let dir = Path::new("/ev/c4/vllm-bench");
    let a = argv(&p, &dir.join("prompts.jsonl"), dir);
    assert_eq!(after(&a, "--backend"), Some("openai-chat"));
    assert_eq!(
        after(&a, "--base-url"),
        Some("http://127.0.0.1:8080/openai")
    );
    assert_eq!(after(&a, "--endpoint"), Some("/v1/chat/completions"));
    assert_eq!(after(&a, "--model"), Some("smollm2"));
    assert_eq!(after(&a, "--max-concurrency"), Some("4"));
    assert_eq!(after(&a, "--num-prompts"), Some("24"));
    assert_eq!(after(&a, "--num-warmups"), Some("2"));
    assert_eq!(after(&a, "--seed"), Some("7"));
    assert_eq!(after(&a, "--dataset-name"), Some("custom"));
    assert_eq!(
        after(&a, "--dataset-path"),
        Some("/ev/c4/vllm-bench/prompts.jsonl")
    );
    assert_eq!(after(&a, "--custom-output-len"), Some("-1"));
    assert_eq!(after(&a, "--ready-check-timeout-sec"), Some("0"));
    assert_eq!(after(&a, "--result-dir"), Some("/ev/c4/vllm-bench"));
    assert_eq!(after(&a, "--result-filename"), Some(RESULT_FILE));
    for flag in [
        "--save-result",
        "--save-detailed",
        "--skip-chat-template",
        "--disable-shuffle",
    ] {
        assert!(a.iter().any(|x| x == flag), "{flag} missing: {a:?}");
    }
    for flag in ["--request-rate", "--ignore-eos", "--temperature"] {
        assert!(!a.iter().any(|x| x == flag), "{flag} present: {a:?}");
    }
    let prompts = servegate::run::load::prompts(&g, g.load.as_ref().unwrap()).unwrap();
    let pairs: Vec<(String, u32)> = prompts
        .iter()
        .map(|p| (p.prompt.clone(), p.max_tokens))
        .collect();
    let lines: Vec<serde_json::Value> = prompts_jsonl(&pairs)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            serde_json::json!({"prompt": "a", "output_tokens": 8}),
            serde_json::json!({"prompt": "b", "output_tokens": 8}),
        ]
    );
}

/// An open-loop point: `--request-rate R` with Poisson gaps (`--burstiness 1.0`), the gate's
/// `max_concurrency` as the bench's cap, `ignore_eos` and the gate's sampling passed on.
#[test]
fn an_open_loop_point_becomes_a_poisson_request_rate() {
    let g = parse_with(
        "temperature = 0.0\ntop_k = 1",
        "rate_rps = [0.5, 8.0]\nmax_concurrency = 3\nrequests = 10\nignore_eos = true\ndriver = \"vllm-bench\"",
    )
    .unwrap();
    let p = plan_of(&g, Point::Rate(0.5), "http://localhost:9000");
    let a = argv(&p, &PathBuf::from("/d/p.jsonl"), Path::new("/d"));
    assert_eq!(after(&a, "--request-rate"), Some("0.5"));
    assert_eq!(after(&a, "--burstiness"), Some("1.0"));
    assert_eq!(after(&a, "--max-concurrency"), Some("3"));
    assert_eq!(after(&a, "--num-prompts"), Some("10"));
    assert_eq!(after(&a, "--num-warmups"), Some("0"));
    assert_eq!(after(&a, "--model"), Some("m"));
    assert_eq!(after(&a, "--base-url"), Some("http://localhost:9000"));
    assert_eq!(after(&a, "--temperature"), Some("0"));
    assert_eq!(after(&a, "--top-k"), Some("1"));
    assert!(a.iter().any(|x| x == "--ignore-eos"), "{a:?}");
    // Without a cap, an open loop has none.
    let g = parse("rate_rps = 8.0\nrequests = 10\ndriver = \"vllm-bench\"").unwrap();
    let a = argv(
        &plan_of(&g, Point::Rate(8.0), "http://h:1"),
        Path::new("/p"),
        Path::new("/d"),
    );
    assert_eq!(after(&a, "--request-rate"), Some("8"));
    assert_eq!(after(&a, "--max-concurrency"), None);
}

/// `driver = "aiperf"`: implies AIPerf provisioned; constant arrivals are AIPerf's own
/// (`--arrival-pattern constant`), a duration and `client_cpus` are refused as with vLLM's bench.
#[test]
fn the_aiperf_driver_keys_and_refusals() {
    let g =
        parse("rate_rps = 2.0\narrival = \"constant\"\nrequests = 4\ndriver = \"aiperf\"").unwrap();
    assert_eq!(g.requires.provisioned, vec!["aiperf".to_string()]);
    assert!(g.requires.provisioned_markers[0].ends_with("provisioned/aiperf"));
    assert_eq!(g.load.unwrap().spec.driver, Driver::AiPerf);
    for (load, want) in [
        (
            "concurrency = 2\nduration_s = 10\ndriver = \"aiperf\"",
            "not a duration",
        ),
        (
            "concurrency = 2\nrequests = 4\nclient_cpus = [0]\ndriver = \"aiperf\"",
            "AIPerf sends",
        ),
    ] {
        let e = parse(load).unwrap_err();
        assert!(e.contains(want), "{load}: {e}");
    }
}

/// AIPerf's command line: a closed loop is `--concurrency N` with `--request-count`; an open loop
/// `--request-rate R` with the gate's arrival (`poisson` or `constant`) and its cap as `--concurrency`;
/// the gate's prompts as a `single_turn` dataset with the one `max_tokens` as the output length (stddev
/// 0), `ignore_eos` as an extra input, warmups only when asked.
#[test]
fn an_aiperf_point_becomes_its_command_line() {
    use servegate::io::aiperf::{argv as aargv, prompts_jsonl as aprompts};
    let g = parse_with(
        "served_model = \"smollm2\"",
        "concurrency = 4\nrequests = 24\nwarmup_requests = 2\nignore_eos = true\ndriver = \"aiperf\"",
    )
    .unwrap();
    let load = g.load.clone().unwrap();
    let t = Target::parse("http://127.0.0.1:8080", None).unwrap();
    let p = servegate::io::tool::ToolSchedule::of(&g, &load, Point::Concurrency(4), 24, &t);
    let a = aargv(&p, Path::new("/d/prompts.jsonl"), Path::new("/d/artifacts"));
    assert_eq!(a[0], "profile");
    assert_eq!(after(&a, "--model"), Some("smollm2"));
    assert_eq!(after(&a, "--url"), Some("http://127.0.0.1:8080"));
    assert_eq!(after(&a, "--endpoint-type"), Some("chat"));
    assert_eq!(after(&a, "--concurrency"), Some("4"));
    assert_eq!(after(&a, "--request-count"), Some("24"));
    assert_eq!(after(&a, "--warmup-request-count"), Some("2"));
    assert_eq!(after(&a, "--output-tokens-mean"), Some("8"));
    assert_eq!(after(&a, "--output-tokens-stddev"), Some("0"));
    assert_eq!(after(&a, "--custom-dataset-type"), Some("single_turn"));
    assert_eq!(after(&a, "--input-file"), Some("/d/prompts.jsonl"));
    assert_eq!(after(&a, "--artifact-dir"), Some("/d/artifacts"));
    assert_eq!(after(&a, "--extra-inputs"), Some(r#"{"ignore_eos": true}"#));
    assert!(a.iter().any(|x| x == "--streaming"));
    assert_eq!(after(&a, "--request-rate"), None);

    let g = parse("rate_rps = 0.5\narrival = \"constant\"\nmax_concurrency = 3\nrequests = 10\ndriver = \"aiperf\"").unwrap();
    let load = g.load.clone().unwrap();
    let p = servegate::io::tool::ToolSchedule::of(&g, &load, Point::Rate(0.5), 10, &t);
    let a = aargv(&p, Path::new("/p"), Path::new("/a"));
    assert_eq!(after(&a, "--request-rate"), Some("0.5"));
    assert_eq!(after(&a, "--arrival-pattern"), Some("constant"));
    assert_eq!(after(&a, "--concurrency"), Some("3"));
    assert_eq!(after(&a, "--warmup-request-count"), None);
    assert_eq!(after(&a, "--extra-inputs"), None);
    let g = parse("rate_rps = 2.0\nrequests = 10\ndriver = \"aiperf\"").unwrap();
    let load = g.load.clone().unwrap();
    let p = servegate::io::tool::ToolSchedule::of(&g, &load, Point::Rate(2.0), 10, &t);
    let a = aargv(&p, Path::new("/p"), Path::new("/a"));
    assert_eq!(after(&a, "--arrival-pattern"), Some("poisson"));
    assert_eq!(after(&a, "--concurrency"), None);
    assert_eq!(
        aprompts(&["a \"q\"".to_string()]),
        "{\"text\":\"a \\\"q\\\"\"}\n"
    );
}

/// AIPerf takes one output length: a dataset whose prompts ask different `max_tokens` is refused before
/// anything runs, and so is a serve with an API key (AIPerf would take it on its command line).
#[test]
fn aiperf_refuses_mixed_output_lengths_and_an_api_key() {
    let g = parse("concurrency = 2\nrequests = 4\ndriver = \"aiperf\"").unwrap();
    let load = g.load.clone().unwrap();
    let t = Target::parse("http://127.0.0.1:9", None).unwrap();
    let p = servegate::io::tool::ToolSchedule::of(&g, &load, Point::Concurrency(2), 4, &t);
    let dir = tempfile::tempdir().unwrap();
    let mixed = [("a".to_string(), 8), ("b".to_string(), 16)];
    let e = servegate::io::aiperf::run(
        &p,
        &mixed,
        dir.path(),
        std::time::Duration::from_secs(1),
        None,
    )
    .unwrap_err();
    assert!(e.contains("one output length"), "{e}");
    let e = servegate::io::aiperf::run(
        &p,
        &[("a".to_string(), 8)],
        dir.path(),
        std::time::Duration::from_secs(1),
        Some("k"),
    )
    .unwrap_err();
    assert!(e.contains("API key"), "{e}");
    assert!(!dir.path().join("aiperf").exists(), "nothing ran");
}

/// The GuideLLM plan of point `point` of gate `g` against `url`.
fn guidellm_plan_of(
    g: &spec::GateSpec,
    point: Point,
    url: &str,
) -> servegate::io::guidellm::GuideLlmPlan {
    let load = g.load.clone().unwrap();
    let t = Target::parse(url, None).unwrap();
    let n = load.spec.requests.unwrap() as usize;
    servegate::run::load_tool::guidellm_plan(g, &load, point, n, &t)
}

/// `driver = "guidellm"`: implies GuideLLM provisioned (its marker, so a gate where it is missing is
/// skipped naming scripts/provision-guidellm.sh); constant arrivals are GuideLLM's own (profile
/// `constant`); a duration and `client_cpus` are refused as with the other tools, and so is a Locust key.
#[test]
fn the_guidellm_driver_keys_and_refusals() {
    let g = parse("rate_rps = 2.0\narrival = \"constant\"\nrequests = 4\ndriver = \"guidellm\"")
        .unwrap();
    assert_eq!(g.requires.provisioned, vec!["guidellm".to_string()]);
    assert!(g.requires.provisioned_markers[0].ends_with("provisioned/guidellm"));
    assert_eq!(g.load.unwrap().spec.driver, Driver::GuideLlm);
    // Against an empty cache: unmet, naming the script (no `--second-model`: GuideLLM serves no model).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.toml");
    let ctx = spec::Context {
        gate_dir: dir.path().to_path_buf(),
        cache: dir.path().join("cache"),
        home: None,
    };
    let text = text_with("", "concurrency = 2\nrequests = 4\ndriver = \"guidellm\"");
    let unmet = spec::parse(&file, &text, &ctx).unwrap().requirements();
    assert_eq!(unmet.len(), 1, "{unmet:?}");
    assert!(
        unmet[0].contains("runtime guidellm is not provisioned")
            && unmet[0].ends_with("run scripts/provision-guidellm.sh"),
        "{}",
        unmet[0]
    );
    for (load, want) in [
        (
            "concurrency = 2\nduration_s = 10\ndriver = \"guidellm\"",
            "servegate runs GuideLLM with a number of requests, not a duration",
        ),
        (
            "concurrency = 2\nrequests = 4\nclient_cpus = [0]\ndriver = \"guidellm\"",
            "GuideLLM sends",
        ),
        (
            "concurrency = 2\nrequests = 4\nlocust_workers = 1\ndriver = \"guidellm\"",
            "is a key of `driver = \"locust\"`",
        ),
        (
            "concurrency = 2\nrequests = 4\ndriver = \"guidelm\"",
            "\"aiperf\" or \"guidellm\", got \"guidelm\"",
        ),
    ] {
        let e = parse(load).unwrap_err();
        assert!(e.contains(want), "{load}: {e}");
    }
}

/// A closed-loop point becomes GuideLLM's `concurrent` profile with the point's streams (no GuideLLM
/// `warmup`: the warmups are the dataset's first lines, marked on import), a `max_requests` constraint of
/// the judged requests plus the warmups, the served model at the serve's base URL (prefix kept), no second
/// readiness check, streamed chat completions with the gate's body keys (`max_tokens`, `temperature`,
/// `[request.extra]`, `ignore_eos`) merged into every request, the gate's seed, the prompts file as its
/// dataset and one JSON report; `python -m guidellm run -c <scenario>`.
#[test]
fn a_guidellm_closed_loop_point_becomes_a_concurrent_profile() {
    use servegate::io::guidellm::{argv as gargv, scenario};
    let g = parse_with(
        "served_model = \"smollm2\"\ntemperature = 0.0\ntimeout_s = 30\n[request.extra]\nchat_template_kwargs = { enable_thinking = false }",
        "concurrency = [1, 4]\nrequests = 24\nwarmup_requests = 2\nseed = 7\nignore_eos = true\ndriver = \"guidellm\"",
    )
    .unwrap();
    let p = guidellm_plan_of(&g, Point::Concurrency(4), "http://127.0.0.1:8080/openai");
    let sc = scenario(
        &p,
        Path::new("/ev/c4/guidellm/prompts.jsonl"),
        Path::new("/ev/c4/guidellm/report.json"),
    );
    assert_eq!(sc.as_object().unwrap().len(), 1, "{sc}");
    let sc = &sc["spec"];
    assert_eq!(
        sc["profile"],
        serde_json::json!({"kind": "concurrent", "streams": [4]})
    );
    assert_eq!(
        sc["constraints"],
        serde_json::json!([{"kind": "max_requests", "count": 26}])
    );
    let b = &sc["backend"];
    assert_eq!(b["kind"], "openai_http");
    assert_eq!(b["target"], "http://127.0.0.1:8080/openai");
    assert_eq!(b["model"], "smollm2");
    assert_eq!(b["request_format"], "/v1/chat/completions");
    assert_eq!(b["stream"], true);
    assert_eq!(b["validate_backend"], false);
    assert_eq!(b["timeout"], 30.0);
    assert_eq!(
        b["extras"]["body"],
        serde_json::json!({
            "max_tokens": 8,
            "temperature": 0.0,
            "ignore_eos": true,
            "chat_template_kwargs": {"enable_thinking": false},
        })
    );
    assert_eq!(
        sc["seed"],
        serde_json::json!({"kind": "static", "value": 7})
    );
    assert_eq!(
        sc["data"],
        serde_json::json!([{"kind": "json_file", "path": "/ev/c4/guidellm/prompts.jsonl"}])
    );
    assert_eq!(
        sc["outputs"],
        serde_json::json!([{"kind": "json", "path": "/ev/c4/guidellm/report.json"}])
    );
    assert_eq!(
        gargv(Path::new("/ev/s.json")),
        [
            "-m",
            "guidellm",
            "run",
            "-c",
            "/ev/s.json",
            "--disable-console-interactive"
        ]
    );
}

/// An open-loop point becomes GuideLLM's `poisson` profile (or `constant` for `arrival = "constant"`)
/// at the point's rate, with the gate's `max_concurrency` as its cap; no
/// `ignore_eos` or sampling key the gate did not ask for.
#[test]
fn a_guidellm_open_loop_point_becomes_a_poisson_or_constant_profile() {
    use servegate::io::guidellm::scenario;
    let g =
        parse("rate_rps = [0.5, 8.0]\nmax_concurrency = 3\nrequests = 10\ndriver = \"guidellm\"")
            .unwrap();
    let sc = &scenario(
        &guidellm_plan_of(&g, Point::Rate(0.5), "http://localhost:9000"),
        Path::new("/p"),
        Path::new("/r"),
    )["spec"];
    assert_eq!(
        sc["profile"],
        serde_json::json!({"kind": "poisson", "rate": [0.5], "max_concurrency": 3})
    );
    assert_eq!(sc["constraints"][0]["count"], 10);
    assert_eq!(
        sc["backend"]["extras"]["body"],
        serde_json::json!({"max_tokens": 8})
    );
    let g = parse("rate_rps = 8.0\narrival = \"constant\"\nrequests = 10\ndriver = \"guidellm\"")
        .unwrap();
    let sc = &scenario(
        &guidellm_plan_of(&g, Point::Rate(8.0), "http://h:1"),
        Path::new("/p"),
        Path::new("/r"),
    )["spec"];
    assert_eq!(
        sc["profile"],
        serde_json::json!({"kind": "constant", "rate": [8.0]})
    );
}

/// GuideLLM's dataset: one line per request, the warmups first, each starting from the gate's first
/// prompt (prompt `i % len`, as servegate's own client picks them), the gate's system message on every
/// line when it sets one (GuideLLM sends it as a system message before the prompt).
#[test]
fn the_guidellm_dataset_has_one_line_per_request_in_the_clients_order() {
    use servegate::io::guidellm::prompts_jsonl as gprompts;
    let p = ["a".to_string(), "b \"q\"".to_string()];
    let rows: Vec<serde_json::Value> = gprompts(&p, None, 1, 3)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows,
        [
            serde_json::json!({"prompt": "a"}),
            serde_json::json!({"prompt": "a"}),
            serde_json::json!({"prompt": "b \"q\""}),
            serde_json::json!({"prompt": "a"}),
        ]
    );
    assert_eq!(
        gprompts(&p[..1], Some("be brief"), 0, 1),
        "{\"prompt\":\"a\",\"system\":\"be brief\"}\n"
    );
}

/// GuideLLM is given one `max_tokens`: a prompt asking another is refused before anything runs, and so
/// is a serve with an API key (it would sit in GuideLLM's scenario file or on its command line).
#[test]
fn guidellm_refuses_another_max_tokens_and_an_api_key() {
    let g = parse("concurrency = 2\nrequests = 4\ndriver = \"guidellm\"").unwrap();
    let p = guidellm_plan_of(&g, Point::Concurrency(2), "http://127.0.0.1:9");
    let dir = tempfile::tempdir().unwrap();
    let wall = std::time::Duration::from_secs(1);
    let mixed = [("a".to_string(), 8), ("b".to_string(), 16)];
    let e = servegate::io::guidellm::run(&p, &mixed, None, dir.path(), wall, None).unwrap_err();
    assert!(
        e.contains("one max_tokens for every request (8) and a prompt asks 16"),
        "{e}"
    );
    let e = servegate::io::guidellm::run(
        &p,
        &[("a".to_string(), 8)],
        None,
        dir.path(),
        wall,
        Some("k"),
    )
    .unwrap_err();
    assert!(e.contains("API key"), "{e}");
    assert!(!dir.path().join("guidellm").exists(), "nothing ran");
}
