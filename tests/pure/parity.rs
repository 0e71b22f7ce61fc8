//! Cross-tool parity (`[load] parity`, `[assert.parity]`; docs/load.md "Cross-tool parity"): the gate's
//! keys and refusals, and judging on built evidence (pure: no process, no socket): a point's run by
//! servegate's client (`c2`) and by the tool (its `parity` directory, an import naming the tool) written as served
//! exactly on a synthetic schedule, then judged as `servegate judge` does (`run::load::judge_dir`).
//! The runs of the real tools are tests/cli/load_parity.rs.

use std::path::Path;

use crate::fixtures::load::{find, gate, ok_meta, spec_with, summary};
use servegate::evidence::imported::Imported;
use servegate::evidence::load::{LoadRecord, LOAD_FILE, LOAD_SCHEMA};
use servegate::evidence::{EvidenceWriter, RequestRecord};
use servegate::io::load_client::SendTiming;
use servegate::io::reads::TimedRead;
use servegate::judge::parity::{truth_of, PARITY_DIR, TRUTH_HEADER, UNAVAILABLE};
use servegate::judge::{Outcome, Verdict};
use servegate::replay::{synthetic, SyntheticSpec};
use servegate::spec::{self, load::Driver, load::ParityLimit, GateSpec};

/// How one side of a point is written.
struct SideOf<'a> {
    /// The schedule each request was served on (one per request).
    specs: &'a [SyntheticSpec],
    /// The tool's provenance (`run.json` `imported`): None for servegate's client.
    imported: Option<Imported>,
    /// Keep the synthetic serve's truth header on each response (a real serve states none).
    truth: bool,
    /// Planned requests (more than `specs.len()`: some never sent).
    planned: usize,
    /// Notes of the side's run.json.
    notes: Vec<String>,
}

/// Writes one side of point c=2 into `dir`: every request served exactly on its schedule (reads at the
/// serve's send times), one after another on two slots.
fn write_side(dir: &Path, g: &GateSpec, side: SideOf) {
    let w = EvidenceWriter::create_exact(dir).unwrap();
    let mut s = summary(g, side.planned);
    s.imported = side.imported.clone();
    s.notes = side.notes.clone();
    let mut free = [0.0f64; 2];
    let mut timings = Vec::new();
    for (i, sp) in side.specs.iter().enumerate() {
        let plan = synthetic::plan(sp, i as u64 + 1, true);
        let reads: Vec<TimedRead> = plan
            .sends
            .iter()
            .map(|x| TimedRead {
                recv_ms: None,
                t_ms: x.at.as_secs_f64() * 1000.0,
                bytes: x.bytes.clone(),
            })
            .collect();
        let e2e = reads.last().unwrap().t_ms;
        let at = free[i % 2];
        free[i % 2] = at + e2e;
        timings.push(SendTiming {
            index: i,
            intended_ms: at,
            woke_ms: at,
            slot_ms: at,
            sent_ms: at,
            end_ms: at + e2e,
            runtime: None,
        });
        let mut meta = ok_meta(e2e);
        if side.truth {
            for (k, v) in &plan.headers {
                meta.headers.insert(k.clone(), v.clone());
            }
        }
        w.write_request(i, &serde_json::json!({"messages": []}), &meta, &reads)
            .unwrap();
        s.requests.push(RequestRecord {
            index: i,
            prompt_index: i % 3,
            prompt: ["a", "b", "c"][i % 3].into(),
            stream: true,
            http_status: Some(200),
            body_bytes: reads.iter().map(|r| r.bytes.len() as u64).sum(),
            ..Default::default()
        });
    }
    w.write_summary(&s).unwrap();
    let rec = LoadRecord {
        schema: LOAD_SCHEMA.into(),
        point: "c=2".into(),
        arrival: "closed".into(),
        concurrency: Some(2),
        rate_rps: None,
        max_concurrency: None,
        warmup: 0,
        planned: side.planned,
        timings,
        client: None,
        driver: None,
    };
    w.write(LOAD_FILE, &serde_json::to_vec(&rec).unwrap())
        .unwrap();
}

/// AIPerf 0.13.0's provenance, as its import writes it.
fn aiperf() -> Imported {
    Imported {
        tool: "aiperf".into(),
        version: Some("0.13.0".into()),
        file: "profile_export.jsonl".into(),
        file_sha256: "0".repeat(64),
        text_recorded: true,
        ..Default::default()
    }
}

/// The parity gate used below: c=2, 12 requests, AIPerf, bounds on TTFT p50 (2 ms), TPOT p50 (5 % of
/// servegate's figure) and TTFT p95 (which 12 requests cannot claim).
fn parity_gate(dir: &Path) -> GateSpec {
    parity_gate_with(
        dir,
        "[assert.parity]\nttft_p50_ms = 2\ntpot_p50_pct = 5\nttft_p95_ms = 2",
    )
}

/// [`parity_gate`] with other `[assert.parity]` bounds.
fn parity_gate_with(dir: &Path, asserts: &str) -> GateSpec {
    gate(
        dir,
        "concurrency = 2\nrequests = 12\nparity = \"aiperf\"",
        asserts,
    )
}

/// Writes servegate's client's side (TTFT 40 ms, a token every 10 ms, the truth header kept when `truth`)
/// and the tool's side (`tool`: its schedule, `n` of 12 requests) of point c=2, and judges the run.
fn judged(truth: bool, tool: SyntheticSpec, n: usize, notes: Vec<String>) -> Vec<Verdict> {
    judged_by(None, truth, tool, n, notes)
}

/// [`judged`] under other `[assert.parity]` bounds (`asserts`; None: [`parity_gate`]'s).
fn judged_by(
    asserts: Option<&str>,
    truth: bool,
    tool: SyntheticSpec,
    n: usize,
    notes: Vec<String>,
) -> Vec<Verdict> {
    let tmp = tempfile::tempdir().unwrap();
    let g = match asserts {
        Some(a) => parity_gate_with(tmp.path(), a),
        None => parity_gate(tmp.path()),
    };
    let root = tmp.path().join("run");
    std::fs::create_dir_all(&root).unwrap();
    let own = vec![spec_with(40.0, 10.0, 8); 12];
    write_side(
        &root.join("c2"),
        &g,
        SideOf {
            specs: &own,
            imported: None,
            truth,
            planned: 12,
            notes: Vec::new(),
        },
    );
    let theirs = vec![tool; n];
    write_side(
        &root.join("c2").join(PARITY_DIR),
        &g,
        SideOf {
            specs: &theirs,
            imported: Some(aiperf()),
            truth: false,
            planned: 12,
            notes,
        },
    );
    servegate::run::load::judge_dir(&g, &root)
}

/// The tool and servegate's client agree within the bound: PASS, both figures and the difference shown,
/// the tool's figure marked as its own (name and version), and the synthetic serve's truth as referee.
/// A percentile 12 requests cannot claim (p95 needs 59) is INDETERMINATE with both n.
#[test]
fn two_clients_that_agree_pass_and_the_referee_names_the_closer() {
    let vs = judged(true, spec_with(41.0, 10.0, 8), 12, Vec::new());
    assert_eq!(vs.len(), 3, "{vs:#?}");
    let v = find(&vs, "[c=2]::parity_ttft_p50");
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    for want in [
        "aiperf 0.13.0 41.00 ms, servegate's client 40.00 ms, difference +1.00 ms (within the bound of 2 ms)",
        "referee: the serve's truth 40.00 ms (x-servegate-synthetic-truth, 12 replies)",
        "servegate's client is closer (servegate's client +0.00 ms off, aiperf 0.13.0 +1.00 ms off)",
        "aiperf 0.13.0's figures are its own timings, not servegate's client's",
        "servegate's client n=12 of 12 planned; aiperf 0.13.0 n=12 of 12 planned",
    ] {
        assert!(v.message.contains(want), "{want}: {}", v.message);
    }
    let v = find(&vs, "[c=2]::parity_tpot_p50");
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    let v = find(&vs, "[c=2]::parity_ttft_p95");
    assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
    assert!(
        v.message
            .contains("needs at least 59 requests on each side")
            && v.message.contains("n=12 of 12 planned"),
        "{}",
        v.message
    );
}

/// The tool reads TTFT 45 ms where servegate's client read 40 on a serve that scheduled 40: FAIL, with
/// both figures, the difference, and the referee naming servegate's client as the closer; TPOT, the same
/// on both sides, still passes.
#[test]
fn a_tool_that_disagrees_fails_and_the_truth_says_who_is_off() {
    let vs = judged(true, spec_with(45.0, 10.0, 8), 12, Vec::new());
    let v = find(&vs, "[c=2]::parity_ttft_p50");
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(
        v.message
            .contains("aiperf 0.13.0 45.00 ms, servegate's client 40.00 ms, difference +5.00 ms (beyond the bound of 2 ms)")
            && v.message.contains("servegate's client is closer"),
        "{}",
        v.message
    );
    let v = find(&vs, "[c=2]::parity_tpot_p50");
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        v.message.contains(
            "difference +0.00 ms (within the bound of 5% of servegate's client's figure, 0.50 ms)"
        ),
        "{}",
        v.message
    );
    // A TPOT 1 ms longer through the tool: 10 % apart, beyond 5 %.
    let vs = judged(true, spec_with(40.0, 11.0, 8), 12, Vec::new());
    let v = find(&vs, "[c=2]::parity_tpot_p50");
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(
        v.message.contains(
            "difference +1.00 ms (beyond the bound of 5% of servegate's client's figure, 0.50 ms)"
        ),
        "{}",
        v.message
    );
}

/// On a serve that states no truth (a real serve) the verdict says there is no referee, never one made up.
#[test]
fn without_the_serves_truth_there_is_no_referee() {
    let vs = judged(false, spec_with(45.0, 10.0, 8), 12, Vec::new());
    let v = find(&vs, "[c=2]::parity_ttft_p50");
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(
        v.message
            .contains("no referee: the serve states no true timings")
            && !v.message.contains("is closer"),
        "{}",
        v.message
    );
}

/// Too few on one side: the tool's run holds 3 of 12 planned requests (it exited early, its note says
/// why): VOID, the missing count and the tool's note named. A run where the tool was not provisioned:
/// INDETERMINATE, naming the provisioning script, never failed.
#[test]
fn too_few_on_one_side_or_no_tool_is_never_a_pass() {
    let note = "load_client: aiperf: aiperf profile exited with exit status: 1".to_string();
    let vs = judged(true, spec_with(40.0, 10.0, 8), 3, vec![note]);
    for v in &vs {
        assert_eq!(v.outcome, Outcome::Void, "{}", v.message);
        assert!(
            v.message
                .contains("9 of 12 planned requests of aiperf 0.13.0 are missing (load_client: aiperf: aiperf profile exited")
                && v.message.contains("not compared"),
            "{}",
            v.message
        );
    }
    let absent = format!("{UNAVAILABLE}AIPerf is not provisioned: run scripts/provision-aiperf.sh");
    let vs = judged(true, spec_with(40.0, 10.0, 8), 0, vec![absent]);
    assert_eq!(vs.len(), 3);
    for v in &vs {
        assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
        assert!(
            v.message.contains(
                "not compared: AIPerf is not provisioned: run scripts/provision-aiperf.sh"
            ),
            "{}",
            v.message
        );
    }
}

/// The synthetic serve states each reply's schedule in its truth header; the judge reads each key.
#[test]
fn the_synthetic_serve_states_its_schedule() {
    let plan = synthetic::plan(&spec_with(40.0, 10.0, 8), 1, true);
    let (_, h) = plan
        .headers
        .iter()
        .find(|(k, _)| k == TRUTH_HEADER)
        .expect("the truth header");
    assert_eq!(
        h,
        "ttft_ms=40.000;tpot_ms=10.000;itl_ms=10.000;e2e_ms=110.000"
    );
    assert_eq!(truth_of(h, "tpot_ms"), Some(10.0));
    assert_eq!(truth_of(h, "e2e_ms"), Some(110.0));
    assert_eq!(truth_of(h, "nope_ms"), None);
    assert_eq!(truth_of("ttft_ms=inf", "ttft_ms"), None);
}

fn parse(load: &str, asserts: &str) -> Result<GateSpec, String> {
    let text = format!(
        "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"a\"]\n[load]\n{load}\n{asserts}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.toml");
    spec::parse(&file, &text, &spec::Context::for_file(&file)).map_err(|e| e.to_string())
}

/// The keys: `[load] parity` names the tool (no `[requires]` implied: a missing tool is INDETERMINATE),
/// `[assert.parity]` the bounds (0 allowed); the trial names. Refused, naming the key: an unknown tool, a
/// tool driver beside it, one without the other, a mistyped bound key, a negative bound, what the tool
/// cannot run (a duration).
#[test]
fn the_parity_keys_and_refusals() {
    let g = parse(
        "concurrency = [1, 2]\nrequests = 6\nparity = \"guidellm\"",
        "[assert.parity]\nttft_p50_ms = 0\ntpot_p90_pct = 1.5",
    )
    .unwrap();
    assert!(g.requires.provisioned.is_empty());
    let l = g.load.as_ref().unwrap();
    assert_eq!(l.spec.parity, Some(Driver::GuideLlm));
    assert_eq!(l.spec.driver, Driver::Servegate);
    let b: Vec<(&str, ParityLimit)> = l
        .assertions
        .parity
        .iter()
        .map(|b| (b.key.as_str(), b.limit))
        .collect();
    assert_eq!(
        b,
        vec![
            ("tpot_p90_pct", ParityLimit::Pct(1.5)),
            ("ttft_p50_ms", ParityLimit::Ms(0.0))
        ]
    );
    assert_eq!(
        l.trial_names(),
        vec![
            "[c=1]::parity_tpot_p90",
            "[c=1]::parity_ttft_p50",
            "[c=2]::parity_tpot_p90",
            "[c=2]::parity_ttft_p50"
        ]
    );
    let ok = "[assert.parity]\nttft_p50_ms = 5";
    // servegate's client may still be spread over CPUs: it runs too.
    let g = parse(
        "concurrency = 2\nrequests = 6\nclient_cpus = 1\nparity = \"aiperf\"",
        ok,
    )
    .unwrap();
    assert_eq!(g.load.unwrap().spec.parity, Some(Driver::AiPerf));
    let cases = [
        (
            "concurrency = 2\nrequests = 6\nparity = \"locust\"",
            ok,
            "load.parity",
            "must be \"vllm-bench\", \"aiperf\" or \"guidellm\"",
        ),
        (
            "concurrency = 2\nrequests = 6\nparity = \"aiperf\"\ndriver = \"guidellm\"",
            ok,
            "load.parity",
            "leave `driver` out",
        ),
        (
            "concurrency = 2\nrequests = 6\nparity = \"aiperf\"",
            "[assert.errors]\nmax_rate = 0.0",
            "load.parity",
            "give [assert.parity]",
        ),
        (
            "concurrency = 2\nrequests = 6",
            ok,
            "assert.parity",
            "name the tool in [load] parity",
        ),
        (
            "concurrency = 2\nrequests = 6\nparity = \"aiperf\"",
            "[assert.parity]\nttft_p50 = 5",
            "assert.parity.ttft_p50",
            "unknown parity bound",
        ),
        (
            "concurrency = 2\nrequests = 6\nparity = \"aiperf\"",
            "[assert.parity]\nttft_p50_ms = -1",
            "assert.parity.ttft_p50_ms",
            ">= 0",
        ),
        (
            "rate_rps = 2.0\nrequests = 6\narrival = \"constant\"\nparity = \"vllm-bench\"",
            ok,
            "load.arrival",
            "with parity = \"vllm-bench\"",
        ),
        (
            "concurrency = 2\nrequests = 6\nparity = \"aiperf\"",
            "[assert.parity]\nttft_p50_ms = 5\nttft_p50_pct = 10",
            "assert.parity.ttft_p50_pct",
            "one bound per percentile",
        ),
        (
            "concurrency = 2\nduration_s = 5\nparity = \"aiperf\"",
            ok,
            "load.duration_s",
            "with parity = \"aiperf\"",
        ),
        (
            "concurrency = 2\nrequests = 6\nparty = \"aiperf\"",
            ok,
            "party",
            "unknown field",
        ),
    ];
    for (load, asserts, key, want) in cases {
        let e = parse(load, asserts).unwrap_err();
        assert!(
            e.contains(key) && e.contains(want),
            "{load} / {asserts}: {e}"
        );
    }
}

/// ITL pools every gap of every reply: its n is of gaps (8 tokens, 7 gaps a reply, 84 over 12 replies),
/// stated beside the planned requests, never as "84 of 12 planned".
#[test]
fn an_itl_parity_counts_gaps_beside_the_planned_requests() {
    let vs = judged_by(
        Some("[assert.parity]\nitl_p50_ms = 1"),
        true,
        spec_with(40.0, 10.5, 8),
        12,
        Vec::new(),
    );
    let v = find(&vs, "[c=2]::parity_itl_p50");
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        v.message.contains("difference +0.50 ms")
            && v.message.contains("referee: the serve's truth 10.00 ms")
            && v.message.contains("servegate's client n=84 gaps from 12 of 12 planned requests; aiperf 0.13.0 n=84 gaps from 12 of 12 planned requests"),
        "{}",
        v.message
    );
}

/// What the tool's output states is outside text: a version with a terminal escape in it reaches the
/// verdict escaped (no raw control byte), still named as the tool's.
#[test]
fn the_tools_name_and_version_are_escaped_in_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let g = parity_gate_with(tmp.path(), "[assert.parity]\nttft_p50_ms = 2");
    let root = tmp.path().join("run");
    std::fs::create_dir_all(&root).unwrap();
    let specs = vec![spec_with(40.0, 10.0, 8); 12];
    let side = |imported: Option<Imported>| SideOf {
        specs: &specs,
        imported,
        truth: true,
        planned: 12,
        notes: Vec::new(),
    };
    write_side(&root.join("c2"), &g, side(None));
    let mut imp = aiperf();
    imp.version = Some("0.13.0\u{1b}[31m\nred".into());
    write_side(&root.join("c2").join(PARITY_DIR), &g, side(Some(imp)));
    let vs = servegate::run::load::judge_dir(&g, &root);
    let v = find(&vs, "[c=2]::parity_ttft_p50");
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        !v.message.contains('\u{1b}') && !v.message.contains('\n'),
        "{:?}",
        v.message
    );
    assert!(
        v.message.contains("ttft p50: aiperf 0.13.0"),
        "{}",
        v.message
    );
}
