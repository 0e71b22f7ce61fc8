//! The peers' latency figures through the cross-tool parity gate mode (docs/load.md "Cross-tool parity";
//! `[load] parity`, `[assert.parity]`): per tool and concurrency, `cargo xtask bench-self --peers --only load`
//! writes a parity gate ([`gate_text`]) and runs it with the built `servegate run -v` against a fresh
//! synthetic serve, so servegate's client and the tool run the same closed-loop schedule, and the gate's
//! own verdicts (`crates/core/src/judge/parity.rs`, the serve's `x-servegate-synthetic-truth` header as
//! referee) are what the bench reports ([`parse_verdicts`]). Nothing here reads a tool's aggregate output.
//!
//! What the gate mode does not do stays in `bench_peers_load`: each tool's CPU per token (its own process
//! tree, run alone on a pinned CPU) and llama-benchy (no driver).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::bench_common::{cpus, pin_command, servegate_exe, Synth};
use crate::bench_load_case::LoadCase;

/// The tools the gate mode runs (`[load] parity = "<name>"`), with the names shown in the report.
pub const PARITY_TOOLS: [(&str, &str); 3] = [
    ("aiperf", "AIPerf"),
    ("guidellm", "GuideLLM"),
    ("vllm-bench", "vLLM bench"),
];

/// The bounds judged at every point, as `[assert.parity]` keys: TTFT within 10 ms of servegate's client's
/// figure, TPOT within 10 % of it, at p50, p95 and p99 (p95 and p99 are INDETERMINATE under 59 and 299
/// requests a side: the gate's own rule).
pub const BOUNDS: [(&str, &str); 6] = [
    ("ttft_p50", "ttft_p50_ms = 10"),
    ("ttft_p95", "ttft_p95_ms = 10"),
    ("ttft_p99", "ttft_p99_ms = 10"),
    ("tpot_p50", "tpot_p50_pct = 10"),
    ("tpot_p95", "tpot_p95_pct = 10"),
    ("tpot_p99", "tpot_p99_pct = 10"),
];

/// The parity gate of `tool` (`aiperf`, `guidellm`, `vllm-bench`) for `case` against the serve at `url`:
/// the case's closed loop (`concurrency`, `requests`, no warmup), one prompt, `max_tokens` = the case's
/// tokens, `max_lag_ms` 1000 (a busy runner's lag is not what is compared), and [`BOUNDS`].
pub fn gate_text(tool: &str, url: &str, case: &LoadCase) -> String {
    let bounds: Vec<&str> = BOUNDS.iter().map(|b| b.1).collect();
    format!(
        "[gate]\nname = \"peers-parity-{tool}-c{c}\"\n[serve]\nurl = \"{url}\"\n[request]\nmodel = \"synthetic\"\nmax_tokens = {tokens}\nprompts = [\"hi\"]\n[load]\nconcurrency = {c}\nrequests = {n}\nwarmup_requests = 0\nmax_lag_ms = 1000\nparity = \"{tool}\"\n[assert.parity]\n{}\n",
        bounds.join("\n"),
        c = case.concurrency,
        n = case.requests,
        tokens = case.tokens,
    )
}

/// One parity verdict as `servegate run -v` printed it: the outcome (`PASS`, `FAIL`, `INDETERMINATE`,
/// `VOID`), the details, and the figures the details state (ms): the tool's, servegate's client's and the
/// serve's truth at the bound's percentile (None when the verdict compared nothing, or no referee).
#[derive(Debug, Clone, PartialEq)]
pub struct ParityVerdict {
    /// PASS, FAIL, INDETERMINATE or VOID.
    pub outcome: String,
    /// What follows the outcome on the verdict line (escaped by servegate).
    pub details: String,
    /// The tool's figure, ms.
    pub tool_ms: Option<f64>,
    /// servegate's client's figure, ms.
    pub ours_ms: Option<f64>,
    /// The serve's truth at the same percentile, ms.
    pub truth_ms: Option<f64>,
}

/// The first number after `marker` in `s` (`"... truth 40.00 ms"`, marker `"truth "`: 40.0).
fn number_after(s: &str, marker: &str) -> Option<f64> {
    let rest = &s[s.find(marker)? + marker.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// The number just before `marker` in `s`, a ` ms` unit skipped (`"aiperf 0.13.0 45.99 ms, servegate's"`,
/// marker `", servegate's client "`: 45.99).
fn number_before(s: &str, marker: &str) -> Option<f64> {
    let head = s[..s.find(marker)?].trim_end();
    let head = head.strip_suffix(" ms").unwrap_or(head);
    head.split_whitespace().last()?.parse().ok()
}

/// The parity verdicts of point `c=<c>` in `servegate run -v` output, by bound name (`ttft_p50`): lines
/// `[c=16]::parity_ttft_p50 PASS ttft p50: <tool> 45.99 ms, servegate's client 40.31 ms, difference ...;
/// referee: the serve's truth 40.00 ms (...` (docs/load.md "Cross-tool parity"). A bound without a line is
/// left out.
pub fn parse_verdicts(stdout: &str, c: usize) -> Vec<(String, ParityVerdict)> {
    let prefix = format!("[c={c}]::parity_");
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix(&prefix)?;
            let (name, rest) = rest.split_once(' ')?;
            let (outcome, details) = rest.split_once(' ').unwrap_or((rest, ""));
            let compared = outcome == "PASS" || outcome == "FAIL";
            let figures = compared.then(|| {
                (
                    number_before(details, ", servegate's client "),
                    number_after(details, ", servegate's client "),
                    number_after(details, "the serve's truth "),
                )
            });
            let (tool_ms, ours_ms, truth_ms) = figures.unwrap_or((None, None, None));
            Some((
                name.to_string(),
                ParityVerdict {
                    outcome: outcome.to_string(),
                    details: details.to_string(),
                    tool_ms,
                    ours_ms,
                    truth_ms,
                },
            ))
        })
        .collect()
}

/// One cell: `tool − truth (servegate − truth) OUTCOME` in ms, or the outcome alone when nothing was
/// compared.
pub fn cell(v: Option<&ParityVerdict>) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    let off = |x: Option<f64>| {
        x.zip(v.truth_ms)
            .map(|(a, t)| format!("{:+.2}", a - t))
            .unwrap_or_else(|| "-".into())
    };
    match (v.tool_ms, v.ours_ms) {
        (Some(_), Some(_)) => format!("{} ({}) {}", off(v.tool_ms), off(v.ours_ms), v.outcome),
        _ => v.outcome.clone(),
    }
}

/// One tool at one point: a fresh synthetic serve (its timing log in the point's directory), the parity
/// gate run by `servegate run -v` pinned to CPU 1 (the tool is its child), and its verdicts. Returns the
/// JSON of the point and the verdicts; a run that printed no parity verdict is an error with the output's
/// last lines.
fn run_point(
    tool: &str,
    case: &LoadCase,
    dir: &Path,
) -> Result<(Vec<(String, ParityVerdict)>, Value), String> {
    let c = case.concurrency;
    let out = dir.join(format!("parity-{tool}-c{c}"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let synth = Synth::start(&case.serve_args(), &out.join("timing.jsonl"))?;
    let gate = out.join("gate.toml");
    std::fs::write(&gate, gate_text(tool, &synth.url, case))
        .map_err(|e| format!("{}: {e}", gate.display()))?;
    let mut cmd = Command::new(servegate_exe()?);
    cmd.arg("run")
        .arg("-v")
        .arg(&gate)
        .arg("--runs")
        .arg(out.join("runs"))
        .stdin(Stdio::null());
    if cpus() >= 2 {
        pin_command(&mut cmd, 1);
    }
    let t0 = std::time::Instant::now();
    let o = cmd.output().map_err(|e| format!("servegate run: {e}"))?;
    let wall_s = t0.elapsed().as_secs_f64();
    drop(synth);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let _ = std::fs::write(out.join("stdout.log"), stdout.as_bytes());
    let _ = std::fs::write(out.join("stderr.log"), &o.stderr);
    let verdicts = parse_verdicts(&stdout, c);
    if verdicts.is_empty() {
        let se = String::from_utf8_lossy(&o.stderr);
        let all: Vec<&str> = stdout.lines().chain(se.lines()).collect();
        return Err(format!(
            "servegate run exited {:?} with no parity verdict: {}",
            o.status.code(),
            servegate::text::shown(&all[all.len().saturating_sub(4)..].join(" | "))
        ));
    }
    let j = json!({
        "concurrency": c, "requests": case.requests, "exit": o.status.code(), "wall_s": wall_s,
        "evidence": out.join("runs").display().to_string(),
        "verdicts": verdicts.iter().map(|(n, v)| json!({"bound": n, "outcome": v.outcome, "tool_ms": v.tool_ms,
            "servegate_client_ms": v.ours_ms, "truth_ms": v.truth_ms, "details": v.details})).collect::<Vec<_>>(),
    });
    Ok((verdicts, j))
}

/// The parity table: every gate-mode tool at every case, into `report`; every verdict as JSON.
pub fn section(cases: &[LoadCase], dir: &Path, report: &mut Vec<String>) -> Value {
    let bounds: Vec<&str> = BOUNDS.iter().map(|b| b.1).collect();
    report.push(format!(
        "### Through the parity gate mode (`[load] parity`, `[assert.parity]` {})\n",
        bounds.join(", ")
    ));
    report.push("Each cell: the tool's figure − the serve's truth (servegate's client's − the truth) ms, and the gate's verdict on |tool − servegate's client|; the truth is the synthetic serve's `x-servegate-synthetic-truth` at the same percentile; INDETERMINATE when a side has fewer values than the percentile needs (p95: 59, p99: 299). Every verdict line in the JSON.\n".into());
    report.push("| tool | concurrency | requests | TTFT p50 | TTFT p95 | TTFT p99 | TPOT p50 | TPOT p95 | TPOT p99 | wall s |\n|---|---|---|---|---|---|---|---|---|---|".into());
    let mut tools = serde_json::Map::new();
    for (tool, shown) in PARITY_TOOLS {
        let mut pts = Vec::new();
        for case in cases {
            let c = case.concurrency;
            eprintln!("bench: parity gate with {shown} at concurrency {c} ...");
            match run_point(tool, case, dir) {
                Ok((verdicts, j)) => {
                    let get = |b: &str| verdicts.iter().find(|(n, _)| n == b).map(|(_, v)| v);
                    let cells: Vec<String> = BOUNDS.iter().map(|b| cell(get(b.0))).collect();
                    report.push(format!(
                        "| {shown} | {c} | {} | {} | {:.1} |",
                        case.requests,
                        cells.join(" | "),
                        j["wall_s"].as_f64().unwrap_or(f64::NAN)
                    ));
                    pts.push(j);
                }
                Err(e) => {
                    report.push(format!(
                        "| {shown} | {c} | {} | not run: {} | | | | | | |",
                        case.requests,
                        e.replace('|', "/")
                    ));
                    pts.push(json!({"concurrency": c, "error": e}));
                }
            }
        }
        tools.insert(shown.into(), json!({"parity": tool, "points": pts}));
    }
    report.push(String::new());
    Value::Object(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASS: &str = "[c=16]::parity_ttft_p50 PASS ttft p50: aiperf 0.13.0 45.99 ms, servegate's client 40.31 ms, difference +5.68 ms (within the bound of 10 ms); referee: the serve's truth 40.00 ms (x-servegate-synthetic-truth, 12 replies): servegate's client is closer (servegate's client +0.31 ms off, aiperf 0.13.0 +5.99 ms off); aiperf 0.13.0's figures are its own timings";

    #[test]
    fn a_compared_verdict_gives_the_three_figures() {
        let out = format!("gate peers\n{PASS}\n[c=16]::parity_ttft_p99 INDETERMINATE ttft p99 not compared: claiming p99 needs at least 299 requests on each side (servegate's client n=32 of 32 planned; ...)\n[c=1]::parity_ttft_p50 PASS other point\n");
        let v = parse_verdicts(&out, 16);
        assert_eq!(v.len(), 2, "only this point's parity lines");
        assert_eq!(v[0].0, "ttft_p50");
        assert_eq!(v[0].1.outcome, "PASS");
        assert_eq!(
            (v[0].1.tool_ms, v[0].1.ours_ms, v[0].1.truth_ms),
            (Some(45.99), Some(40.31), Some(40.0))
        );
        assert_eq!(v[1].0, "ttft_p99");
        assert_eq!(v[1].1.outcome, "INDETERMINATE");
        assert_eq!(v[1].1.tool_ms, None, "nothing compared, no figures");
        assert_eq!(cell(Some(&v[0].1)), "+5.99 (+0.31) PASS");
        assert_eq!(cell(Some(&v[1].1)), "INDETERMINATE");
        assert_eq!(cell(None), "-");
    }

    #[test]
    fn no_referee_leaves_the_offsets_unknown() {
        let l = "[c=1]::parity_tpot_p50 FAIL tpot p50: guidellm 0.8.1 12.50 ms, servegate's client 10.05 ms, difference +2.45 ms (beyond the bound of 10% of servegate's client's figure, 1.00 ms); no referee: the serve states no true timings";
        let v = parse_verdicts(l, 1);
        assert_eq!(
            (v[0].1.tool_ms, v[0].1.ours_ms, v[0].1.truth_ms),
            (Some(12.5), Some(10.05), None)
        );
        assert_eq!(cell(Some(&v[0].1)), "- (-) FAIL");
    }

    #[test]
    fn the_gate_names_the_tool_the_point_and_every_bound() {
        let case = LoadCase {
            concurrency: 16,
            requests: 32,
            tokens: 64,
            ttft_ms: 20.0,
            itl_ms: 12.0,
        };
        let g = gate_text("guidellm", "http://127.0.0.1:9", &case);
        for want in [
            "parity = \"guidellm\"",
            "concurrency = 16\n",
            "requests = 32\n",
            "max_tokens = 64\n",
            "url = \"http://127.0.0.1:9\"",
            "tpot_p99_pct = 10\n",
        ] {
            assert!(g.contains(want), "{want} in {g}");
        }
        let file = std::path::Path::new("parity.toml");
        let ctx = servegate::spec::Context::for_file(file);
        if let Err(e) = servegate::spec::parse(file, &g, &ctx) {
            panic!("servegate refuses the bench's gate: {e}\n{g}");
        }
    }
}
