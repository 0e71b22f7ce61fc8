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
use servegate::sinks::report::{AssertionResult, GateResults, Producer, Results, TestOutcome};

fn run_results() -> Results {
    let mut r = Results::begin(Producer::Run, false);
    let fig = |name: &str, outcome, median: f64, unit: &str, values: Vec<Option<f64>>| {
        let mut t = AssertionResult::new("g", name, outcome, None, &format!("{name} ..."), 0.0);
        t.median = Some(median);
        t.bound = Some(15.0);
        t.unit = Some(unit.into());
        t.values = values;
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
