//! What goes here: the exporters in process on built results. `servegate export` as a program (committed
//! records, a run directory, a results JSON) is tests/cli/exports.rs.
//!
//! Dashboard exports (records into existing dashboards: Bencher, github-action-benchmark, OpenMetrics): `servegate export --bmf | --gab-bigger | --gab-smaller | --openmetrics` from the
//! committed records and from a run. BMF is validated against Bencher's published JSON schema
//! (tests/data/schemas/bmf.json, https://bencher.dev/bmf.json); the github-action-benchmark files against their
//! shape (an array of `{name, unit, value, range?, extra?}`, one direction per file). Every figure carries its
//! unit and, where the source has a range, its bounds; a figure that is not a decided pass or fail is never
//! charted as one.

use std::path::Path;

use crate::fixtures::exports::{assert_gab_shape, bmf_validator};
use serde_json::Value;
use servegate::sinks::exports::{self, bmf, gab, openmetrics};
use servegate::sinks::report::{
    AssertionResult, GateResults, MetricResult, Producer, Results, TestOutcome, RESULTS_SCHEMA,
};
use servegate::vocab::{Bound, Metric};

fn run_results() -> Results {
    let mut r = Results::begin(Producer::Run, false);
    let fig = |name: &str, outcome, median: f64, unit: &str, values: Vec<Option<f64>>| {
        let mut t = AssertionResult::new("g", name, outcome, None, &format!("{name} ..."), 0.0);
        t.median = Some(median);
        t.bound = Some(15.0);
        t.unit = Some(unit.into());
        t.values = values;
        let metric = if name == "rate" {
            Metric::DecodeRate
        } else {
            Metric::Ttft
        };
        t.metric = Some(MetricResult::of(metric));
        t.bound_kind = Some(Bound::for_metric(metric, 15.0).kind());
        t
    };
    let tests = vec![
        fig(
            "rate",
            TestOutcome::Passed,
            20.0,
            "tok/s",
            vec![Some(18.0), Some(20.0), Some(25.0)],
        ),
        fig(
            "first_token",
            TestOutcome::Indeterminate,
            90.0,
            "ms",
            vec![Some(90.0), None],
        ),
        AssertionResult::new("g", "route", TestOutcome::Passed, None, "route PASS", 0.0),
    ];
    r.push(GateResults::not_run(
        "g",
        Path::new("gates/g.toml"),
        "",
        "x",
        tests,
    ));
    r.finish(1.0);
    r
}

#[test]
fn an_indeterminate_figure_of_a_run_is_never_charted_as_a_pass() {
    let figures = exports::from_results(&run_results());
    assert_eq!(figures.len(), 2, "only assertions with a statistic");
    let rate = &figures[0];
    assert_eq!(
        (rate.lower, rate.upper, rate.bound),
        (Some(18.0), Some(25.0), Some(15.0))
    );
    assert_eq!(rate.n, Some((3, 3)));
    // BMF: the indeterminate figure under its own measure, and its verdict 0.
    let doc: Value = serde_json::from_slice(&bmf::serialize(&figures)).unwrap();
    assert!(bmf_validator().is_valid(&doc));
    assert_eq!(doc["g"]["rate-tok-s"]["value"].as_f64(), Some(20.0));
    assert_eq!(doc["g"]["rate-pass"]["value"].as_f64(), Some(1.0));
    assert!(doc["g"].get("first-token-ms").is_none());
    assert_eq!(
        doc["g"]["first-token-ms-indeterminate"]["value"].as_f64(),
        Some(90.0)
    );
    assert_eq!(doc["g"]["first-token-pass"]["value"].as_f64(), Some(0.0));
    // gab: left out of the smaller-is-better file, with a note.
    let (bytes, notes) = gab::serialize(&figures, false);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(assert_gab_shape(&doc).is_empty());
    assert_eq!(notes.len(), 1);
    assert!(notes[0].starts_with("g::first_token left out: its state is indeterminate"));
    let (bytes, _) = gab::serialize(&figures, true);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc[0]["range"], "18 to 25");
    // OpenMetrics: every sample states its state and unit.
    let text = String::from_utf8(openmetrics::serialize(&figures)).unwrap();
    assert!(text.contains(
        "servegate_figure{benchmark=\"g\",measure=\"first_token\",unit=\"ms\",state=\"indeterminate\"} 90\n"
    ), "{text}");
    assert!(
        text.contains(
            "servegate_bound{benchmark=\"g\",measure=\"rate\",unit=\"tok/s\",state=\"pass\"} 15\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.contains("state=\"") && l.contains("unit=\""), "{l}");
    }
}

/// The results carry each figure's metric (the registry's, as the run judged it); the exports take the
/// direction from there. An assertion whose name suggests the other direction (here `rate`, which in a `/1`
/// file meant the decode rate, over a lower-is-better metric) is charted the way its metric says: a reader
/// that guessed from the name would put it in the bigger-is-better file.
#[test]
fn an_export_takes_the_direction_from_the_results_metric_not_the_assertion_name() {
    let mut r = run_results();
    let t = &mut r.gates[0].assertions[0];
    assert_eq!(t.name, "rate");
    t.metric = Some(MetricResult::of(Metric::Tpot));
    t.unit = Some("ms".into());
    let figures = exports::from_results(&r);
    assert!(!figures[0].higher_is_better, "tpot is lower-is-better");
    let (bytes, _) = gab::serialize(&figures, true);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        doc.as_array().unwrap().is_empty(),
        "nothing bigger-is-better: {doc}"
    );
    // An assertion with a median but no metric states no figure (nothing to guess it from).
    r.gates[0].assertions[0].metric = None;
    assert_eq!(exports::from_results(&r).len(), 1);
}

/// The results JSON states, per figure assertion, its metric (name, unit, which way is better), its bound's
/// side and its declaring line; a `/1` file (none of these) still reads, its metrics those of the kinds.
#[test]
fn results_v2_state_metric_bound_kind_and_line_and_a_v1_file_still_reads() {
    let mut r = run_results();
    r.gates[0].assertions[0].line = Some(12);
    let v: Value = serde_json::from_slice(&servegate::sinks::json::serialize(&r)).unwrap();
    assert_eq!(v["schema"], RESULTS_SCHEMA);
    assert_eq!(RESULTS_SCHEMA, "servegate.results/2");
    let rate = &v["gates"][0]["assertions"][0];
    assert_eq!(rate["line"], 12);
    assert_eq!(rate["bound"], 15.0);
    assert_eq!(rate["bound_kind"], "floor");
    assert_eq!(
        rate["metric"],
        serde_json::json!({"name": "decode_rate", "unit": "tok/s", "better": "higher"})
    );
    let ft = &v["gates"][0]["assertions"][1];
    assert_eq!(ft["bound_kind"], "limit");
    assert_eq!(ft["metric"]["name"], "ttft");
    assert_eq!(ft["metric"]["better"], "lower");
    let route = &v["gates"][0]["assertions"][2];
    assert!(route["metric"].is_null() && route["bound_kind"].is_null() && route["line"].is_null());
    assert_eq!(
        Results::from_json(v.clone()).unwrap(),
        r,
        "a /2 file reads back as written"
    );

    // The same document as a /1 file wrote it: no metric, bound_kind or line.
    let mut old = v;
    old["schema"] = "servegate.results/1".into();
    for t in old["gates"][0]["assertions"].as_array_mut().unwrap() {
        let t = t.as_object_mut().unwrap();
        t.remove("metric");
        t.remove("bound_kind");
        t.remove("line");
    }
    let read = Results::from_json(old).unwrap();
    assert_eq!(read.schema, RESULTS_SCHEMA);
    let a = &read.gates[0].assertions;
    assert_eq!(a[0].metric, Some(MetricResult::of(Metric::DecodeRate)));
    assert_eq!(a[0].bound_kind, Some(servegate::vocab::BoundKind::Floor));
    assert_eq!(a[1].metric, Some(MetricResult::of(Metric::Ttft)));
    assert_eq!(a[1].bound_kind, Some(servegate::vocab::BoundKind::Limit));
    assert_eq!((a[0].line, a[2].metric), (None, None));
    assert_eq!(exports::from_results(&read).len(), 2);
    let e = Results::from_json(serde_json::json!({"schema": "servegate.results/9"})).unwrap_err();
    assert!(e.contains("servegate.results/9"), "{e}");
}

/// A record's footprint figures travel with it: BMF measures under the record's benchmark
/// (`ready-ms-ms`, `serve-rss-peak-mib-mib`, ...), OpenMetrics gauges with their unit; a figure the record
/// states as null (the evidence had none) is left out, never exported as 0.
#[test]
fn a_records_footprint_figures_are_bmf_measures_and_openmetrics_gauges_and_a_null_is_left_out() {
    use servegate::records::record::{parse, RecordFootprint};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(
        root.join("data/records/smollm2-135m-q4_1-llamacpp-1thread-20261129-decode-rate.json"),
    )
    .unwrap();
    let mut r = parse(&text).unwrap();
    r.footprint = Some(RecordFootprint {
        ready_ms: Some(1816.8),
        rss_peak_mib: Some(182.3),
        cpu_ms_per_token: None,
        model_load_ms: Some(412.5),
        unavailable: [("cpu_ms_per_token".to_string(), "no CPU window".to_string())].into(),
    });
    let figures = exports::from_records(std::slice::from_ref(&r));
    let names: Vec<String> = figures.iter().map(|f| f.name()).collect();
    assert_eq!(
        names[1..],
        [
            format!("{}::ready_ms", r.id),
            format!("{}::model_load_ms", r.id),
            format!("{}::serve_rss_peak_mib", r.id)
        ]
    );
    assert!(figures[1..].iter().all(|f| !f.higher_is_better));
    let doc: Value = serde_json::from_slice(&bmf::serialize(&figures)).unwrap();
    let b = &doc[&r.id];
    assert_eq!(b["ready-ms-ms"]["value"].as_f64(), Some(1816.8), "{b}");
    assert_eq!(b["model-load-ms-ms"]["value"].as_f64(), Some(412.5), "{b}");
    assert_eq!(
        b["serve-rss-peak-mib-mib"]["value"].as_f64(),
        Some(182.3),
        "{b}"
    );
    assert!(
        b.as_object()
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("serve-cpu")),
        "a null figure is left out: {b}"
    );
    let errors: Vec<String> = bmf_validator()
        .iter_errors(&doc)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let om = String::from_utf8(openmetrics::serialize(&figures)).unwrap();
    assert!(
        om.contains(&format!(
            "servegate_figure{{benchmark=\"{}\",measure=\"serve_rss_peak_mib\",unit=\"MiB\",state=\"pass\"",
            r.id
        )),
        "{om}"
    );
    assert!(!om.contains("serve_cpu_ms_per_token"), "{om}");
    // A record without a footprint (published, or written before) exports its figure only.
    r.footprint = None;
    assert_eq!(exports::from_records(std::slice::from_ref(&r)).len(), 1);
}
