//! What goes here: cross-tool parity as a gate mode (`[load] parity`, `[assert.parity]`; docs/load.md
//! "Cross-tool parity"), through the binary: `servegate run` on a gate against the synthetic serve runs the
//! point with servegate's client and with AIPerf (the real tool, `scripts/provision-aiperf.sh`), both kept
//! in the evidence, and judges the parity with the serve's truth as referee; `servegate judge` on the same
//! evidence gives the same verdicts, and with a bound of 0 ms FAILs with both figures; a tool that is not
//! provisioned makes the parity INDETERMINATE, naming the script. Judging on built evidence, and the keys,
//! are tests/pure/parity.rs.

use crate::fixtures::{self, load_per_cpu, Project, BUSY_PER_CPU};

/// A parity gate against the serve at `url`: c=2, 1 warmup + 12 judged, AIPerf beside servegate's client,
/// TTFT p50 and TPOT p50 within `ttft_ms` / `tpot_ms` of each other.
fn gate_text(url: &str, ttft_ms: f64, tpot_ms: f64) -> String {
    format!(
        "[gate]\nname = \"parity\"\n[serve]\nurl = \"{url}\"\n[request]\nmodel = \"synthetic\"\nmax_tokens = 8\nprompts = [\"a\", \"b\", \"c\"]\n[load]\nconcurrency = 2\nrequests = 12\nwarmup_requests = 1\nmax_lag_ms = 1000\nparity = \"aiperf\"\n[assert.errors]\nmax_rate = 0.0\n[assert.parity]\nttft_p50_ms = {ttft_ms}\ntpot_p50_ms = {tpot_ms}\n"
    )
}

/// The verdict line of `name` (`[c=2]::parity_ttft_p50 PASS ...`) in a run's or judge's output.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no verdict {name} in:\n{out}"))
}

/// `servegate judge DIR [--gate GATE]` in `p`: exit code and stdout.
fn judge(p: &Project, dir: &std::path::Path, gate: Option<&std::path::Path>) -> (i32, String) {
    let mut c = p.servegate();
    c.args(["judge", "-v"]).arg(dir);
    if let Some(g) = gate {
        c.arg("--gate").arg(g);
    }
    let o = c.output().unwrap();
    (o.status.code().unwrap_or(-1), fixtures::text(&o))
}

/// The gate mode end to end with AIPerf 0.13.0 against a synthetic serve (TTFT 40 ms, then a token every
/// 10 ms, 8 tokens): both runs in the evidence (servegate's in `c2`, AIPerf's in `c2/parity` with its own
/// files and `run.json` naming it), `[c=2]::parity_ttft_p50` and `parity_tpot_p50` PASS within 50 / 10 ms
/// (as the driver parity tests allow a Python client on a busy runner) naming AIPerf and its version and
/// the serve's truth as referee; `servegate judge` on the run gives the same lines; re-judged with bounds
/// of 0 ms they FAIL, each with both figures and the difference. A disagreement is run again (up to three
/// runs) and, after three on a machine busier than [`BUSY_PER_CPU`], printed, never on a quiet one.
#[test]
fn a_parity_gate_runs_aiperf_beside_servegates_client_and_judges_them() {
    if let Err(e) = servegate::io::aiperf::aiperf_python() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let tok = servegate::io::tool::tokenizer("synthetic");
    if !tok.is_dir() {
        eprintln!(
            "SKIPPED: no tokenizer for AIPerf ({} is missing): run scripts/provision-vllm.sh",
            tok.display()
        );
        return;
    }
    let _one = super::load_vllm_bench::ONE_TOOL
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let url =
        crate::fixtures::load::synthetic_serve(crate::fixtures::load::spec_with(40.0, 10.0, 8));
    let p = Project::new();
    let gate = p.write("parity.toml", &gate_text(&url, 50.0, 10.0));
    for attempt in 1..=3 {
        let o = p
            .servegate()
            .args(["run", "-v", "parity.toml"])
            .output()
            .unwrap();
        let out = fixtures::text(&o);
        let dir = fixtures::evidence_dir(&String::from_utf8_lossy(&o.stdout));
        let ttft = line(&out, "[c=2]::parity_ttft_p50");
        eprintln!("{ttft}\n{}", line(&out, "[c=2]::parity_tpot_p50"));
        // Whatever the timings: both runs are in the evidence, each naming who measured.
        let own = servegate::evidence::read_run_summary(&dir.join("c2")).unwrap();
        assert!(own.imported.is_none());
        let tool = servegate::evidence::read_run_summary(&dir.join("c2/parity")).unwrap();
        let imp = tool.imported.expect("the parity run names the tool");
        assert_eq!(
            (imp.tool.as_str(), imp.version.as_deref()),
            ("aiperf", Some("0.13.0"))
        );
        assert!(dir
            .join("c2/parity/aiperf/artifacts/profile_export.jsonl")
            .is_file());
        // `servegate judge` on the evidence: the same verdicts (a pure function of gate and evidence).
        let (_, judged) = judge(&p, &dir, None);
        for n in ["[c=2]::parity_ttft_p50", "[c=2]::parity_tpot_p50"] {
            assert_eq!(line(&judged, n), line(&out, n));
        }
        // A busy runner: servegate's client too late to time replies, said (INDETERMINATE with the n and
        // the cause), and run again.
        let late = |l: &str| l.contains(" INDETERMINATE ") && l.contains(fixtures::CLIENT_LATE);
        let tpot = line(&out, "[c=2]::parity_tpot_p50");
        if late(ttft) || late(tpot) {
            let load = load_per_cpu();
            eprintln!("aiperf parity gate, run {attempt} of 3: servegate's client too late to time its replies (load {load:.1} per CPU)");
            if attempt == 3 {
                assert!(load > BUSY_PER_CPU, "{ttft}\n{tpot}");
                eprintln!("PARITY NOT ASSERTED: the client was too late three times at load {load:.1} per CPU");
            }
            continue;
        }
        assert!(
            ttft.contains("aiperf 0.13.0 ")
                && ttft.contains("ms, servegate's client ")
                && ttft.contains("referee: the serve's truth 40.00 ms")
                && ttft.contains("aiperf 0.13.0's figures are its own timings"),
            "{ttft}"
        );
        // Bounds of 0 ms: the same two runs disagree, said with both figures and the difference.
        let zero = p.write("zero.toml", &gate_text(&url, 0.0, 0.0));
        let (code, strict) = judge(&p, &dir, Some(&zero));
        assert_eq!(code, 1, "{strict}");
        let z = line(&strict, "[c=2]::parity_ttft_p50");
        assert!(
            z.starts_with("[c=2]::parity_ttft_p50 FAIL ttft p50: aiperf 0.13.0 ")
                && z.contains("beyond the bound of 0 ms")
                && z.contains("is closer"),
            "{z}"
        );
        if o.status.code() == Some(0) {
            assert!(ttft.contains(" PASS "), "{ttft}");
            return;
        }
        let load = load_per_cpu();
        eprintln!("aiperf parity gate, run {attempt} of 3, load {load:.1} per CPU: {out}");
        if attempt == 3 {
            assert!(
                load > BUSY_PER_CPU,
                "the parity gate did not pass three times on a machine not busy (load {load:.1} per CPU):\n{out}"
            );
            eprintln!(
                "PARITY NOT ASSERTED: AIPerf at load {load:.1} per CPU (over {BUSY_PER_CPU})"
            );
        }
    }
    let _ = gate;
}

/// A tool that is not provisioned (an empty cache): servegate's client still runs and its own verdicts
/// stand; the parity verdicts are INDETERMINATE naming the provisioning script, the run exits 8
/// (indeterminate), never 0 and never a FAIL of the serve.
#[test]
fn a_parity_tool_that_is_not_provisioned_is_indeterminate_naming_the_script() {
    let url = crate::fixtures::load::synthetic_serve(crate::fixtures::load::spec_with(5.0, 2.0, 4));
    let p = Project::new();
    p.write("parity.toml", &gate_text(&url, 50.0, 10.0));
    let cache = p.path().join("empty-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let o = p
        .servegate()
        .env("SERVEGATE_CACHE", &cache)
        .args(["run", "parity.toml"])
        .output()
        .unwrap();
    let out = fixtures::text(&o);
    assert_eq!(
        o.status.code(),
        Some(servegate::error::exit::INDETERMINATE),
        "{out}"
    );
    assert!(
        line(&out, "[c=2]::errors").starts_with("[c=2]::errors PASS"),
        "{out}"
    );
    for n in ["[c=2]::parity_ttft_p50", "[c=2]::parity_tpot_p50"] {
        let l = line(&out, n);
        assert!(
            l.contains(" INDETERMINATE not compared: AIPerf is not provisioned")
                && l.contains("run scripts/provision-aiperf.sh"),
            "{l}"
        );
    }
}

/// A tool whose clock reads the first token late: the real AIPerf, run through a wrapper standing in for
/// its Python (`SERVEGATE_AIPERF_PYTHON`) that, after AIPerf's run, adds 60 ms to every record's
/// `time_to_first_token` and `request_latency` (and its end) in `profile_export.jsonl`, as a tool that
/// stamps its first token late would write them. The parity FAILs on TTFT with both figures and a
/// difference of at least 60 ms, and the serve's truth names servegate's client as the closer; the
/// wrapper's shift leaves the gaps, so TPOT is not what failed.
#[test]
fn a_tool_that_reads_the_first_token_late_fails_parity_and_the_truth_says_so() {
    let real = match servegate::io::aiperf::aiperf_python() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
    };
    let tok = servegate::io::tool::tokenizer("synthetic");
    if !tok.is_dir() {
        eprintln!(
            "SKIPPED: no tokenizer for AIPerf ({} is missing): run scripts/provision-vllm.sh",
            tok.display()
        );
        return;
    }
    let _one = super::load_vllm_bench::ONE_TOOL
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let url =
        crate::fixtures::load::synthetic_serve(crate::fixtures::load::spec_with(40.0, 10.0, 8));
    let p = Project::new();
    p.write("parity.toml", &gate_text(&url, 20.0, 10.0));
    let shift = r#"
import glob, json
for f in glob.glob("**/profile_export.jsonl", recursive=True):
    out = []
    for line in open(f):
        r = json.loads(line)
        m = r.get("metrics", {})
        if "time_to_first_token" in m:
            m["time_to_first_token"]["value"] += 60.0
            m["request_latency"]["value"] += 60.0
            r["metadata"]["request_end_ns"] += 60000000
        out.append(json.dumps(r))
    open(f, "w").write("\n".join(out) + "\n")
"#;
    let wrapper = p.write(
        "late-aiperf.sh",
        &format!(
            "#!/bin/sh\n{real:?} \"$@\" || exit $?\n[ \"$1 $2\" = \"-m aiperf\" ] || exit 0\nexec {real:?} -c '{shift}'\n",
            real = real.display().to_string()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = || {
        let o = p
            .servegate()
            .env("SERVEGATE_AIPERF_PYTHON", &wrapper)
            .args(["run", "-v", "parity.toml"])
            .output()
            .unwrap();
        (o.status.code(), fixtures::text(&o))
    };
    // Servegate's client too late to time its replies on a busy runner: run again (up to three runs).
    let (code, out) = fixtures::timed_by_the_client(
        3,
        run,
        |(_, out)| line(out, "[c=2]::parity_ttft_p50").contains(" FAIL "),
        |(_, out)| line(out, "[c=2]::parity_ttft_p50").to_string(),
    );
    let l = line(&out, "[c=2]::parity_ttft_p50");
    if l.contains(fixtures::CLIENT_LATE) && load_per_cpu() > BUSY_PER_CPU {
        eprintln!("PARITY NOT ASSERTED: the client was too late three times: {l}");
        return;
    }
    assert_eq!(code, Some(1), "{out}");
    eprintln!("{l}");
    assert!(
        l.starts_with("[c=2]::parity_ttft_p50 FAIL ttft p50: aiperf 0.13.0 ")
            && l.contains("(beyond the bound of 20 ms)")
            && l.contains("referee: the serve's truth 40.00 ms")
            && l.contains("servegate's client is closer"),
        "{l}"
    );
    let d: f64 = l
        .split("difference ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no difference in {l}"));
    assert!(
        d >= 40.0,
        "the 60 ms shift, less the noise of a busy runner: {l}"
    );
    // Servegate's client's own run judged the serve: no error.
    assert!(
        line(&out, "[c=2]::errors").starts_with("[c=2]::errors PASS"),
        "{out}"
    );
}
