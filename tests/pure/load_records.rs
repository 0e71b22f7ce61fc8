//! Load records (docs/records.md "Load records"): built from the committed live run of
//! gates/reference-load.toml, re-derived by `records check`, edits caught naming the field, percentiles never
//! claimed from too few requests, and the leaderboard's throughput-latency curve.

use std::path::Path;

use crate::fixtures::root;
use servegate::records::leaderboard;
use servegate::records::load_records;
use servegate::records::record::{self, Record};

const RUN: &str = "data/records/evidence/reference-load/20261201T140510Z";
const ID: &str = "smollm2-135m-q4_1-llamacpp-parallel4-load-20261201";

fn committed(suffix: &str) -> Record {
    let f = root().join(format!("data/records/{ID}-{suffix}.json"));
    record::parse(&std::fs::read_to_string(&f).unwrap()).unwrap()
}

fn committed_load_records() -> Vec<Record> {
    [
        "c1-ttft-p50",
        "c1-e2e-p50",
        "c1-output-tok-s",
        "c1-req-s",
        "c4-ttft-p50",
        "c4-e2e-p50",
        "c4-output-tok-s",
        "c4-req-s",
    ]
    .iter()
    .map(|s| committed(s))
    .collect()
}

/// A records directory in a temp dir holding `recs`, their evidence pointing at the committed run (absolute).
fn temp_records(recs: &[Record]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for r in recs {
        let mut r = r.clone();
        r.source.evidence = Some(root().join(RUN).display().to_string());
        std::fs::write(
            tmp.path().join(format!("{}.json", r.id)),
            record::to_json(&r),
        )
        .unwrap();
    }
    tmp
}

fn problems(dir: &Path) -> Vec<String> {
    record::verify_dir(dir)
        .unwrap()
        .iter()
        .flat_map(|c| {
            c.problems
                .iter()
                .map(move |p| format!("{}: {}", c.file.display(), p))
        })
        .collect()
}

#[test]
fn the_committed_load_run_rebuilds_the_committed_records() {
    let gate = servegate::spec::load(&root().join(RUN).join("gate.toml")).unwrap();
    let spec = record::RunRecordSpec {
        id: ID.into(),
        ..toml::from_str("id = \"x\"\nmetric = \"first_token\"\nmodel_name = \"m\"\nmodel_file = \"f\"\nweights = \"w\"\ndevice = \"d\"\nroute = \"r\"\nengine = \"llama.cpp server (xllamacpp)\"\nwhat_would_make_it_wrong = \"a sentence of four words\"\n")
        .unwrap()
    };
    // Re-deriving (an existing record given): the evidence's model file stands for the spec's.
    let existing = committed("c4-ttft-p50");
    let built =
        load_records::from_load_run(&gate, &root().join(RUN), &spec, Some(&existing)).unwrap();
    let ids: Vec<String> = built.iter().map(|r| r.id.clone()).collect();
    assert_eq!(
        ids,
        committed_load_records()
            .iter()
            .map(|r| r.id.clone())
            .collect::<Vec<_>>()
    );
    // 12 requests per point: p50 only, never a p95 (59 needed) or p99 (299).
    assert!(built
        .iter()
        .all(|r| r.statistic == "median" || r.statistic == "window"));
    for r in &built {
        let c = committed(r.id.strip_prefix(&format!("{ID}-")).unwrap());
        assert_eq!(r.value, c.value, "{}", r.id);
        assert_eq!(r.n, 12, "{}", r.id);
        assert_eq!(r.load_point, c.load_point, "{}", r.id);
        let lp = r.load_point.as_ref().unwrap();
        match r.metric.name.as_str() {
            "output_throughput" => {
                let exact = lp.output_tokens as f64 * 1000.0 / lp.window_ms;
                assert!((r.value - exact).abs() <= 0.005, "{} vs {exact}", r.value);
                assert_eq!(
                    lp.output_tokens,
                    12 * 16,
                    "ignore_eos: every reply runs to max_tokens 16"
                );
            }
            "request_throughput" => {
                let exact = 12.0 * 1000.0 / lp.window_ms;
                assert!((r.value - exact).abs() <= 0.0005, "{} vs {exact}", r.value);
            }
            _ => {
                let v = r.values.as_ref().unwrap();
                assert_eq!(v.len(), 12);
                let mut s = v.clone();
                s.sort_by(f64::total_cmp);
                let median = (s[5] + s[6]) / 2.0;
                assert!((r.value - median).abs() <= 0.05, "{} vs {median}", r.value);
            }
        }
    }
    assert_eq!(
        built[4].metric.condition.as_deref(),
        Some("p50 at concurrency 4")
    );
}

#[test]
fn records_check_rederives_load_records_and_names_an_edited_field() {
    let recs = committed_load_records();
    let tmp = temp_records(&recs);
    assert_eq!(problems(tmp.path()), Vec::<String>::new());

    // A TTFT p50 edited (and its values, so the record is self-consistent): re-derivation names it.
    let mut r = committed("c4-ttft-p50");
    let f = 2.0;
    r.values = Some(r.values.unwrap().iter().map(|v| v * f).collect());
    r.value *= f;
    r.range = [r.range[0] * f, r.range[1] * f];
    let tmp = temp_records(&[r]);
    let p = problems(tmp.path());
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("values[0]: states") && p[0].contains("re-judged evidence"),
        "{p:?}"
    );

    // A throughput with its window edited to match: the stated window is not the evidence's.
    let mut r = committed("c4-output-tok-s");
    let lp = r.load_point.as_mut().unwrap();
    lp.window_ms /= 2.0;
    r.value = (lp.output_tokens as f64 * 1000.0 / lp.window_ms * 100.0).round() / 100.0;
    r.range = [r.value, r.value];
    let tmp = temp_records(&[r]);
    let p = problems(tmp.path());
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("value: states"), "{p:?}");

    // A throughput whose value does not follow from its own window: invalid before any evidence is read.
    let mut r = committed("c1-req-s");
    r.value += 0.5;
    r.range = [r.value, r.value];
    let v = record::validate(&r, &r.id);
    assert!(
        v.iter()
            .any(|p| p.field == "value" && p.message.contains("12 requests over the window")),
        "{v:?}"
    );
}

#[test]
fn a_percentile_from_too_few_requests_is_refused_and_window_rules_hold() {
    // The committed c=4 TTFT values (n=12) stated as a p95: refused with the n needed.
    let mut r = committed("c4-ttft-p50");
    r.statistic = "p95".into();
    let v = r.values.clone().unwrap();
    r.value = (load_records::percentile_of("p95", &v).unwrap() * 10.0).round() / 10.0;
    let p = record::validate(&r, &r.id);
    assert!(
        p.iter()
            .any(|p| p.field == "statistic" && p.message.contains("needs at least 59")),
        "{p:?}"
    );
    // The same p95 over 59 values is accepted and recomputed with numpy's linear method.
    let v59: Vec<f64> = (0..59).map(|i| 100.0 + i as f64).collect();
    r.values = Some(v59.clone());
    r.n = 59;
    r.range = [100.0, 158.0];
    // numpy.percentile(range(100, 159), 95) = 100 + 0.95 * 58 = 155.1
    r.value = 155.1;
    assert_eq!(record::validate(&r, &r.id), vec![]);
    r.value = 156.0;
    let p = record::validate(&r, &r.id);
    assert!(
        p.iter()
            .any(|p| p.field == "value" && p.message.contains("p95 recomputed")),
        "{p:?}"
    );
    // `window` is the throughput metrics' statistic, and only theirs; they need a load point.
    let mut r = committed("c1-ttft-p50");
    r.statistic = "window".into();
    assert!(record::validate(&r, &r.id)
        .iter()
        .any(|p| p.field == "statistic"));
    let mut r = committed("c1-output-tok-s");
    r.load_point = None;
    let p = record::validate(&r, &r.id);
    assert!(p.iter().any(|p| p.field == "load_point"), "{p:?}");
    assert!(p.iter().any(|p| p.field == "statistic"), "{p:?}");
}

#[test]
fn the_leaderboard_draws_a_throughput_latency_curve_and_a_table() {
    let recs = committed_load_records();
    let pages = leaderboard::render(&recs, "../records").unwrap();
    // Markdown: one table row per point with its figures and links to its records.
    let md = &pages.markdown;
    assert!(md.contains("## Throughput and latency under load"), "{md}");
    let c4 = md.lines().find(|l| l.starts_with("| c=4 |")).unwrap();
    assert!(
        c4.contains("10.26 tok/s") && c4.contains("0.641 req/s"),
        "{c4}"
    );
    assert!(c4.contains("507.0 ms") && c4.contains("6023.2 ms"), "{c4}");
    assert!(
        c4.contains(&format!("[TTFT p50](../records/{ID}-c4-ttft-p50.json)")),
        "{c4}"
    );
    // Load records stay out of the time-series groups and the comparison bars.
    assert!(
        !md.contains("## SmolLM2-135M-Instruct · first token"),
        "{md}"
    );
    // HTML: two charts (TTFT and E2E against output tok/s), one labelled dot per point, a line through them.
    let html = &pages.html;
    assert_eq!(
        html.matches("against output throughput (tok&#x2f;s)")
            .count(),
        4
    ); // aria-label + title, 2 charts
    assert_eq!(html.matches("<circle class=\"mark\"").count(), 4);
    assert!(html.contains(">c=1</text>") && html.contains(">c=4</text>"));
    // c=1 drew at higher throughput (further right) and lower TTFT (lower = larger y) than c=4 in this run.
    let dots: Vec<(f64, f64)> = html
        .match_indices("<circle class=\"mark\" cx=\"")
        .take(2)
        .map(|(i, _)| {
            let rest = &html[i + 25..];
            let cx: f64 = rest[..rest.find('"').unwrap()].parse().unwrap();
            let j = rest.find("cy=\"").unwrap() + 4;
            let cy: f64 = rest[j..j + rest[j..].find('"').unwrap()].parse().unwrap();
            (cx, cy)
        })
        .collect();
    assert!(dots[0].0 > dots[1].0 && dots[0].1 > dots[1].1, "{dots:?}");
}

#[test]
fn a_misspelt_or_missing_load_point_key_is_named() {
    let text = record::to_json(&committed("c4-req-s"));
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["load_point"]["windw_ms"] = 1.into();
    v["load_point"]
        .as_object_mut()
        .unwrap()
        .remove("concurrency");
    let e = record::parse(&v.to_string()).unwrap_err();
    let fields: Vec<&str> = e.iter().map(|p| p.field.as_str()).collect();
    assert!(fields.contains(&"load_point.windw_ms"), "{e:?}");
    assert!(fields.contains(&"load_point.concurrency"), "{e:?}");
    // A record without load_point (every older record) has no such problem.
    let old = std::fs::read_to_string(
        root().join("data/records/smollm2-135m-q4_1-llamacpp-1thread-20261129-first-token.json"),
    )
    .unwrap();
    assert!(record::parse(&old).is_ok());
}
