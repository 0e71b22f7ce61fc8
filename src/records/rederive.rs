//! Re-deriving a single or pair record from its evidence: the record rebuilt from the re-judged run
//! ([`super::build`]) and compared figure by figure ([`first_difference`]). Which builder re-derives a
//! record, and the evidence checks before it, are the record-kind dispatch (`kind`).

use std::path::{Path, PathBuf};

use super::build::{build_run, from_pair_run_as, public_path, RunRecordSpec, THEIRS_NOT_PUBLISHED};
use super::schema::{unmeasured_text, Problem, Record, Unmeasured, RECORD_SCHEMA};

/// The [`RunRecordSpec`] a record states about itself (what the evidence cannot tell), to rebuild it.
pub(super) fn spec_of(r: &Record, theirs: bool) -> RunRecordSpec {
    RunRecordSpec {
        publish_host: false,
        id: r.id.clone(),
        metric: r.metric.name.clone(),
        model_name: r.model.name.clone(),
        model_file: PathBuf::from(r.model.file.clone().unwrap_or_default()),
        weights: r.model.weights.clone().unwrap_or_default(),
        device: r.device.clone(),
        route: r.route.clone(),
        // A theirs record's engine is theirs' runtime (from the evidence); the builder takes ours' engine
        // from the spec, which a theirs record names as its other engine.
        engine: match &r.pair {
            Some(p) if theirs => p.other_engine.clone(),
            _ => r.settings.engine.clone(),
        },
        engine_version: r.settings.engine_version.clone(),
        backend: r.settings.backend.clone(),
        hold_ticket: r.hold.ticket.clone(),
        what_would_make_it_wrong: r.notes.what_would_make_it_wrong.clone(),
        notes: Vec::new(),
    }
}

/// The first field where `r` (as stated) and `want` (re-derived) differ: (field, stated, derived), each
/// figure formatted at `r`'s decimals.
pub(super) fn first_difference(r: &Record, want: &Record) -> Option<(String, String, String)> {
    let f = |x: f64| r.fmt(x);
    let opt = |x: Option<f64>| x.map(f).unwrap_or_else(|| "null".into());
    let mut diffs: Vec<(String, String, String)> = Vec::new();
    let mut cmp = |field: String, a: String, b: String| {
        if a != b {
            diffs.push((field, a, b));
        }
    };
    let (rv, wv) = (
        r.values.clone().unwrap_or_default(),
        want.values.clone().unwrap_or_default(),
    );
    cmp("n".into(), r.n.to_string(), want.n.to_string());
    for (i, (a, b)) in rv.iter().zip(&wv).enumerate() {
        cmp(format!("values[{i}]"), f(*a), f(*b));
    }
    // The unmeasured replies (none in a record written before they were told apart) are the ones the
    // measure code leaves out of the re-judged evidence: the same requests, for the same causes.
    let none = |u: &[Unmeasured]| {
        if u.is_empty() {
            "none".to_string()
        } else {
            format!("[{}]", unmeasured_text(u))
        }
    };
    cmp(
        "unmeasured".into(),
        none(&r.unmeasured),
        none(&want.unmeasured),
    );
    cmp("value".into(), f(r.value), f(want.value));
    cmp("range[0]".into(), f(r.range[0]), f(want.range[0]));
    cmp("range[1]".into(), f(r.range[1]), f(want.range[1]));
    if let (Some(p), Some(q)) = (&r.pair, &want.pair) {
        cmp(
            "pair.other_value".into(),
            f(p.other_value),
            f(q.other_value),
        );
        cmp(
            "pair.other_n".into(),
            p.other_n.to_string(),
            q.other_n.to_string(),
        );
        cmp(
            "pair.ratio".into(),
            format!("{:.*}", p.ratio_decimals.min(9) as usize, p.ratio),
            format!("{:.*}", p.ratio_decimals.min(9) as usize, q.ratio),
        );
        cmp(
            "pair.other_engine".into(),
            p.other_engine.clone(),
            q.other_engine.clone(),
        );
    } else {
        cmp(
            "pair".into(),
            r.pair.is_some().to_string(),
            want.pair.is_some().to_string(),
        );
    }
    cmp(
        "model.sha256".into(),
        r.model.sha256.clone(),
        want.model.sha256.clone(),
    );
    // As published: a record written before paths were made public (`/root/...`) states the same file as
    // its re-derivation (`~/...`).
    cmp(
        "model.file".into(),
        format!("{:?}", r.model.file.as_deref().map(public_path)),
        format!("{:?}", want.model.file.as_deref().map(public_path)),
    );
    cmp(
        "source.evidence_sha256".into(),
        format!("{:?}", r.source.evidence_sha256),
        format!("{:?}", want.source.evidence_sha256),
    );
    cmp("date".into(), r.date.clone(), want.date.clone());
    cmp(
        "load.load1_start".into(),
        opt(r.load.load1_start),
        opt(want.load.load1_start),
    );
    cmp(
        "load.load1_end".into(),
        opt(r.load.load1_end),
        opt(want.load.load1_end),
    );
    cmp(
        "settings.max_tokens".into(),
        format!("{:?}", r.settings.max_tokens),
        format!("{:?}", want.settings.max_tokens),
    );
    cmp(
        "settings.stream".into(),
        format!("{:?}", r.settings.stream),
        format!("{:?}", want.settings.stream),
    );
    let forced = |x: &Record| match x.source.forced {
        Some(_) => "set (the run failed its verdicts)",
        None => "null (the run passed its verdicts)",
    };
    cmp(
        "source.forced".into(),
        forced(r).into(),
        forced(want).into(),
    );
    cmp(
        "known_answer.result".into(),
        r.known_answer.result.clone(),
        want.known_answer.result.clone(),
    );
    cmp(
        "settings.engine".into(),
        r.settings.engine.clone(),
        want.settings.engine.clone(),
    );
    if r.route == THEIRS_NOT_PUBLISHED || want.route == THEIRS_NOT_PUBLISHED {
        cmp(
            "settings.engine_version".into(),
            format!("{:?}", r.settings.engine_version),
            format!("{:?}", want.settings.engine_version),
        );
        cmp("device".into(), r.device.clone(), want.device.clone());
        cmp("route".into(), r.route.clone(), want.route.clone());
    }
    // The bound a current (`/2`) record states is the one its gate copy declares, as re-built (a `/1` record,
    // written before records carried it, has none to compare).
    if r.schema == RECORD_SCHEMA {
        let shown = |x: &Record| match &x.bound {
            Some(b) => format!("{} {} ({})", b.kind, b.value, b.declared),
            None => "none".into(),
        };
        cmp("bound".into(), shown(r), shown(want));
    }
    if let Some((field, a, b)) = super::footprint::difference(r, want) {
        cmp(field, a, b);
    }
    diffs.into_iter().next()
}

/// Re-derives the pair record `r` from the pair run at `dir` (gate `gate`): rebuilt from the side of the
/// role of the arms it calls `this`, then compared ([`first_difference`]).
pub(super) fn pair(gate: &crate::spec::GateSpec, dir: &Path, r: &Record) -> Vec<Problem> {
    let built = crate::loaded::load_pair(dir).map(|pe| {
        // The record's side: the role of the arms it calls `this`.
        let role = r
            .pair
            .as_ref()
            .and_then(|p| p.arm_order.iter().position(|a| a == "this"))
            .and_then(|k| pe.summary.arms.get(k))
            .map(|a| a.role.clone())
            .unwrap_or_else(|| "ours".into());
        from_pair_run_as(gate, &pe, &spec_of(r, role == "theirs"), &role)
    });
    compare(r, built, dir)
}

/// Re-derives the single-run record `r` from the run at `dir` (gate `gate`; the record's model hash stands
/// where the evidence has none, its forced flag is kept), then compared ([`first_difference`]).
pub(super) fn single(gate: &crate::spec::GateSpec, dir: &Path, r: &Record) -> Vec<Problem> {
    let built =
        crate::loaded::load(dir).map(|ev| build_run(gate, &ev, &spec_of(r, false), Some(r), false));
    compare(r, built, dir)
}

/// The problem of a re-derivation: the evidence that cannot be loaded, gives no record, or gives another
/// figure than `r` states (the first that differs); none when it gives `r`.
fn compare<E: std::fmt::Display>(
    r: &Record,
    built: Result<Result<Record, super::store::RecordError>, E>,
    dir: &Path,
) -> Vec<Problem> {
    let want = match built {
        Err(e) => {
            return vec![Problem::new(
                "source.evidence",
                format!("cannot be loaded: {e}"),
            )]
        }
        Ok(Err(e)) => {
            return vec![Problem::new(
                "source.evidence",
                format!("gives no record: {e}"),
            )]
        }
        Ok(Ok(w)) => w,
    };
    match first_difference(r, &want) {
        Some((field, stated, derived)) => vec![Problem::new(
            field,
            format!(
                "states {stated} but the re-judged evidence {} gives {derived}",
                dir.display()
            ),
        )],
        None => Vec::new(),
    }
}
