//! What goes here: `servegate export` as a program. The exporters in process are tests/pure/exports.rs.
//!
//! Dashboard exports (records into existing dashboards: Bencher, github-action-benchmark, OpenMetrics): `servegate export --bmf | --gab-bigger | --gab-smaller | --openmetrics` from the
//! committed records and from a run. BMF is validated against Bencher's published JSON schema
//! (tests/data/schemas/bmf.json, https://bencher.dev/bmf.json); the github-action-benchmark files against their
//! shape (an array of `{name, unit, value, range?, extra?}`, one direction per file). Every figure carries its
//! unit and, where the source has a range, its bounds; a figure that is not a decided pass or fail is never
//! charted as one.

use crate::fixtures;
use crate::fixtures::exports::{assert_gab_shape, bmf_validator};
use crate::fixtures::root;
use serde_json::Value;
use servegate::sinks::exports::{self, bmf, Figure};

fn export(args: &[&str]) -> (i32, String, String) {
    let out = fixtures::servegate()
        .current_dir(root())
        .arg("export")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn records() -> Vec<servegate::records::record::Record> {
    servegate::records::record::load_dir(&root().join("data/records")).unwrap()
}

#[test]
fn bmf_from_the_committed_records_validates_against_bencher_s_schema() {
    let v = bmf_validator();
    // The schema can fail: a measure without a numeric value is refused.
    assert!(!v.is_valid(&serde_json::json!({"b": {"m": {"value": "fast"}}})));
    assert!(!v.is_valid(&serde_json::json!({"b": {"m": {"lower_value": 1.0}}})));

    let (code, stdout, stderr) = export(&["--bmf"]);
    assert_eq!(code, 0, "{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // Every record is a benchmark; its value under `<metric>-<unit>` (or `-<state>` when undecided), its
    // range as lower/upper, and its verdict as `<metric>-pass`.
    let recs = records();
    assert_eq!(doc.as_object().unwrap().len(), recs.len());
    for r in &recs {
        let b = &doc[&r.id];
        let f = &exports::from_records(std::slice::from_ref(r))[0];
        let m = &b[bmf::measure_slug(f)];
        assert_eq!(m["value"].as_f64(), Some(r.value), "{}", r.id);
        assert_eq!(m["lower_value"].as_f64(), Some(r.range[0]));
        assert_eq!(m["upper_value"].as_f64(), Some(r.range[1]));
        let state = exports::record_state(r);
        let pass = b[format!("{}-pass", bmf::slug(&r.metric.name))]["value"].as_f64();
        assert_eq!(
            pass,
            Some(if state == "pass" { 1.0 } else { 0.0 }),
            "{}",
            r.id
        );
        if state == "indeterminate" {
            assert!(bmf::measure_slug(f).ends_with("-indeterminate"));
            assert!(b
                .get(format!(
                    "{}-{}",
                    bmf::slug(&r.metric.name),
                    bmf::slug(&r.metric.unit)
                ))
                .is_none());
        }
    }
    // The serve's footprint travels with each record (docs/records.md `footprint`); the committed evidence
    // predates the memory and CPU figures, which are left out, never exported as 0.
    let smoke = &doc["smollm2-135m-q4_1-llamacpp-1thread-20261129-decode-rate"];
    assert_eq!(
        smoke["ready-ms-ms"]["value"].as_f64(),
        Some(1816.8),
        "{smoke}"
    );
    assert!(smoke.get("serve-rss-peak-mib-mib").is_none(), "{smoke}");
    assert!(
        smoke.get("serve-cpu-ms-per-token-ms-token").is_none(),
        "{smoke}"
    );
    // The file is the same through -o, written whole.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bmf.json");
    let (code, _, _) = export(&["--bmf", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout);
}

#[test]
fn gab_files_from_the_committed_records_have_their_shape_and_leave_out_what_is_undecided() {
    let recs = records();
    let figures = exports::from_records(&recs);
    for (flag, bigger) in [("--gab-bigger", true), ("--gab-smaller", false)] {
        let (code, stdout, stderr) = export(&[flag]);
        assert_eq!(code, 0, "{stderr}");
        let doc: Value = serde_json::from_str(&stdout).unwrap();
        let arr = assert_gab_shape(&doc);
        let want: Vec<&Figure> = figures
            .iter()
            .filter(|f| f.higher_is_better == bigger && f.decided())
            .collect();
        assert_eq!(arr.len(), want.len(), "{flag}");
        for e in arr {
            let unit = e["unit"].as_str().unwrap();
            // Rates (tok/s, and a load record's req/s) are bigger-is-better, times smaller.
            assert_eq!(matches!(unit, "tok/s" | "req/s"), bigger, "{flag}: {e}");
            assert!(
                e["extra"].as_str().unwrap().starts_with("state pass")
                    || e["extra"].as_str().unwrap().starts_with("state fail")
            );
        }
        for f in figures
            .iter()
            .filter(|f| f.higher_is_better == bigger && !f.decided())
        {
            assert!(
                !stdout.contains(&format!("\"{}\"", f.name())),
                "{} charted",
                f.name()
            );
            assert!(
                stderr.contains(&format!("{} left out: its state is {}", f.name(), f.state)),
                "{stderr}"
            );
        }
    }
    // The committed records hold at least one undecided (indicative) figure, so the omission is exercised.
    assert!(figures.iter().any(|f| !f.decided()));
}

#[test]
fn exports_from_a_run_directory_and_a_results_json() {
    // A committed run directory, re-judged with its own gate.toml.
    let run = "data/records/evidence/reference-smoke/20261129T185356Z";
    let (code, stdout, stderr) = export(&["--openmetrics", run]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("servegate_figure{benchmark=\"reference-smoke\",measure=\"rate\",unit=\"tok/s\",state=\"pass\""), "{stdout}");
    assert!(stdout.ends_with("# EOF\n"));
    // The same run's results JSON gives the same figures.
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("r.json");
    let st = fixtures::servegate()
        .current_dir(root())
        .args(["judge", run, "--json"])
        .arg(&json)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    assert!(st.status.code().is_some());
    let (code, from_json, stderr) = export(&["--openmetrics", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("servegate_figure{"))
            .map(String::from)
            .collect()
    };
    assert_eq!(samples(&from_json), samples(&stdout));
    // Not a source: a clear error, exit 5.
    let bad = tmp.path().join("x.json");
    std::fs::write(&bad, "{\"schema\": \"other/1\"}").unwrap();
    let (code, _, stderr) = export(&["--bmf", bad.to_str().unwrap()]);
    assert_eq!(code, 5);
    assert!(
        stderr.contains("not a record, a results JSON or a run directory"),
        "{stderr}"
    );
}
