//! `servegate self-test`: the judge proves itself on any machine, with no serve and no device.
//!
//! The binary carries its own judging table: small evidence directories (the seed's shapes from
//! `tests/data/seed-runs.md` / `tests/pure/judge_table.rs`, and one shape for each kind of hazard a PASS must never
//! hide: a planned request not accounted for, a failed reply in a median, an interrupted run called complete,
//! ...), each one
//! text bundle embedded with `include_str!` from `tests/data/selftest/*.shape` (written by
//! `tests/data/selftest/make_shapes.py`). [`run`] writes each bundle to a temporary directory, loads it with the
//! same code as `servegate judge` ([`crate::loaded::load`], [`crate::spec::load`]), judges it, and compares the
//! outcome of each expected assertion (PASS/FAIL), or the expected refusal (`evidence_error`, `spec_invalid`),
//! never the exact text. One line per shape (`ok   <shape>: <expected>` or
//! `FAIL <shape>: expected X, got Y`), a summary, exit 0 (every shape as expected) or 1.
//!
//! Bundle format: header lines `# shape: NAME`, `# kind: seed|N`, `# about: TEXT`, `# expect: EXPECTATION`,
//! then files, each introduced by a line `=== FILE` (`gate.toml`, `run.json`, `serve.log`, `NN.reads.jsonl`,
//! and optionally `judge-with.toml`, a gate to judge with instead of `gate.toml`, as `judge --gate` does).
//! EXPECTATION is `assertion=PASS|FAIL ...`, or `evidence_error` (the evidence is refused), `spec_invalid`
//! (the gate is refused), `no_pass` (no verdict passes, or the evidence is refused).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::judge::Outcome;

/// The embedded shapes: (name, bundle text), seed shapes first, then one per kind of hazard a PASS must never hide.
pub const SHAPES: &[(&str, &str)] = &[
    (
        "seed-default-max-tokens-rerun",
        include_str!("../../tests/data/selftest/seed-default-max-tokens-rerun.shape"),
    ),
    (
        "seed-degenerate-reply",
        include_str!("../../tests/data/selftest/seed-degenerate-reply.shape"),
    ),
    (
        "seed-error-reply",
        include_str!("../../tests/data/selftest/seed-error-reply.shape"),
    ),
    (
        "seed-first-token-over-limit",
        include_str!("../../tests/data/selftest/seed-first-token-over-limit.shape"),
    ),
    (
        "seed-floor-edge-59-9",
        include_str!("../../tests/data/selftest/seed-floor-edge-59-9.shape"),
    ),
    (
        "seed-incomplete-evidence",
        include_str!("../../tests/data/selftest/seed-incomplete-evidence.shape"),
    ),
    (
        "seed-known-answer-wrong",
        include_str!("../../tests/data/selftest/seed-known-answer-wrong.shape"),
    ),
    (
        "seed-log-names-both-routes",
        include_str!("../../tests/data/selftest/seed-log-names-both-routes.shape"),
    ),
    (
        "seed-log-names-neither-route",
        include_str!("../../tests/data/selftest/seed-log-names-neither-route.shape"),
    ),
    (
        "seed-max-tokens-96-rerun",
        include_str!("../../tests/data/selftest/seed-max-tokens-96-rerun.shape"),
    ),
    (
        "seed-median-not-mean",
        include_str!("../../tests/data/selftest/seed-median-not-mean.shape"),
    ),
    (
        "seed-missing-timings",
        include_str!("../../tests/data/selftest/seed-missing-timings.shape"),
    ),
    (
        "seed-no-replies-at-all",
        include_str!("../../tests/data/selftest/seed-no-replies-at-all.shape"),
    ),
    (
        "seed-no-serve-log",
        include_str!("../../tests/data/selftest/seed-no-serve-log.shape"),
    ),
    (
        "seed-release-candidate-fast-route",
        include_str!("../../tests/data/selftest/seed-release-candidate-fast-route.shape"),
    ),
    (
        "seed-serve-never-ready",
        include_str!("../../tests/data/selftest/seed-serve-never-ready.shape"),
    ),
    (
        "seed-silent-fallback-per-op",
        include_str!("../../tests/data/selftest/seed-silent-fallback-per-op.shape"),
    ),
    (
        "seed-thinking-left-on",
        include_str!("../../tests/data/selftest/seed-thinking-left-on.shape"),
    ),
    (
        "seed-warmup-not-judged",
        include_str!("../../tests/data/selftest/seed-warmup-not-judged.shape"),
    ),
    (
        "seed-whitespace-only-reply",
        include_str!("../../tests/data/selftest/seed-whitespace-only-reply.shape"),
    ),
    (
        "kind1-requests-never-sent",
        include_str!("../../tests/data/selftest/kind1-requests-never-sent.shape"),
    ),
    (
        "kind2-cut-replies-never-feed-a-median",
        include_str!("../../tests/data/selftest/kind2-cut-replies-never-feed-a-median.shape"),
    ),
    (
        "kind3-interrupted-run",
        include_str!("../../tests/data/selftest/kind3-interrupted-run.shape"),
    ),
    (
        "kind4-burst-flushed-stream",
        include_str!("../../tests/data/selftest/kind4-burst-flushed-stream.shape"),
    ),
    (
        "kind5-malformed-event",
        include_str!("../../tests/data/selftest/kind5-malformed-event.shape"),
    ),
    (
        "kind6-coloured-slow-route-line",
        include_str!("../../tests/data/selftest/kind6-coloured-slow-route-line.shape"),
    ),
    (
        "kind6-gateway-every-reply-failed",
        include_str!("../../tests/data/selftest/kind6-gateway-every-reply-failed.shape"),
    ),
    (
        "kind7-reads-out-of-order",
        include_str!("../../tests/data/selftest/kind7-reads-out-of-order.shape"),
    ),
    (
        "kind8-empty-route-pattern",
        include_str!("../../tests/data/selftest/kind8-empty-route-pattern.shape"),
    ),
    (
        "kind9-capped-body",
        include_str!("../../tests/data/selftest/kind9-capped-body.shape"),
    ),
    (
        "kind10-setup-failed",
        include_str!("../../tests/data/selftest/kind10-setup-failed.shape"),
    ),
    (
        "kind11-only-warmups-recorded",
        include_str!("../../tests/data/selftest/kind11-only-warmups-recorded.shape"),
    ),
    (
        "kind12-rejudge-with-edited-gate",
        include_str!("../../tests/data/selftest/kind12-rejudge-with-edited-gate.shape"),
    ),
];

/// What a shape must give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// These assertions with these outcomes (other assertions are not looked at).
    Verdicts(Vec<(String, Outcome)>),
    /// The evidence is refused (`servegate judge` exits 5).
    EvidenceError,
    /// The gate is refused (`servegate judge` exits 3).
    SpecInvalid,
    /// No verdict passes (or the evidence is refused).
    NoPass,
}

/// What judging a shape gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Got {
    /// The verdicts: (assertion, outcome, verdict line).
    Verdicts(Vec<(String, Outcome, String)>),
    /// The evidence was refused: the error.
    EvidenceError(String),
    /// The gate was refused: the error.
    SpecInvalid(String),
    /// Judging panicked (a servegate bug): the message.
    Panicked(String),
}

/// One parsed shape.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Its name (`seed-...`, `kindN-...`).
    pub name: String,
    /// `seed` or the number of the kind of hazard it shows (`# kind: N`, as the shape files name it).
    pub kind: String,
    /// One line saying what it is.
    pub about: String,
    /// What it must give.
    pub expect: Expect,
    /// (file name, contents) of its evidence directory.
    pub files: Vec<(String, String)>,
}

fn outcome_word(o: Outcome) -> &'static str {
    o.word()
}

impl Expect {
    /// Parses `route=PASS rate=FAIL`, `evidence_error`, `spec_invalid` or `no_pass`.
    pub(crate) fn parse(text: &str) -> Result<Expect, String> {
        match text.trim() {
            "evidence_error" => return Ok(Expect::EvidenceError),
            "spec_invalid" => return Ok(Expect::SpecInvalid),
            "no_pass" => return Ok(Expect::NoPass),
            _ => {}
        }
        let mut v = Vec::new();
        for item in text.split_whitespace() {
            let (a, o) = item.split_once('=').ok_or_else(|| {
                format!("expectation {item:?} is not assertion=OUTCOME (PASS, FAIL, ...)")
            })?;
            let o = Outcome::from_word(o).ok_or_else(|| {
                format!(
                    "outcome {o:?} of {a} is not PASS, FAIL, INDETERMINATE, INCOMPARABLE or VOID"
                )
            })?;
            v.push((a.to_string(), o));
        }
        if v.is_empty() {
            return Err("empty expectation".into());
        }
        Ok(Expect::Verdicts(v))
    }
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expect::Verdicts(v) => {
                let parts: Vec<String> = v
                    .iter()
                    .map(|(a, o)| format!("{a} {}", outcome_word(*o)))
                    .collect();
                write!(f, "{}", parts.join(", "))
            }
            Expect::EvidenceError => write!(f, "evidence refused"),
            Expect::SpecInvalid => write!(f, "gate refused"),
            Expect::NoPass => write!(f, "no verdict passes"),
        }
    }
}

/// Parses one bundle (see the module doc).
pub fn parse_shape(text: &str) -> Result<Shape, String> {
    let (mut name, mut kind, mut about, mut expect) = (None, None, None, None);
    let mut files: Vec<(String, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        if let Some(f) = line.strip_prefix("=== ") {
            files.push((f.trim_end().to_string(), String::new()));
        } else if let Some((_, body)) = files.last_mut() {
            body.push_str(line);
        } else if let Some(h) = line.strip_prefix("# ") {
            let (k, v) = h.split_once(':').unwrap_or((h, ""));
            let v = v.trim().to_string();
            match k {
                "shape" => name = Some(v),
                "kind" => kind = Some(v),
                "about" => about = Some(v),
                "expect" => expect = Some(Expect::parse(&v)?),
                _ => {}
            }
        }
    }
    for (f, _) in &files {
        if f.is_empty() || f.contains('/') || f.starts_with('.') {
            return Err(format!("bad file name {f:?} in the bundle"));
        }
    }
    Ok(Shape {
        name: name.ok_or("no `# shape:` line")?,
        kind: kind.unwrap_or_else(|| "?".into()),
        about: about.unwrap_or_default(),
        expect: expect.ok_or("no `# expect:` line")?,
        files,
    })
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// Writes `shape`'s files into `dir` (which must exist) and judges them as `servegate judge` does (with
/// `judge-with.toml` when the shape has one, as `judge --gate`). I/O errors writing `dir` are returned.
pub fn judge_shape(shape: &Shape, dir: &Path) -> std::io::Result<Got> {
    for (f, body) in &shape.files {
        std::fs::write(dir.join(f), body)?;
    }
    let gate_file = if dir.join("judge-with.toml").is_file() {
        dir.join("judge-with.toml")
    } else {
        dir.join(crate::evidence::layout::GATE_FILE)
    };
    let got = catch_unwind(AssertUnwindSafe(|| {
        let g = match crate::spec::load(&gate_file) {
            Ok(g) => g,
            Err(e) => return Got::SpecInvalid(e.to_string()),
        };
        let ev = match crate::loaded::load(dir) {
            Ok(ev) => ev,
            Err(e) => return Got::EvidenceError(e.to_string()),
        };
        Got::Verdicts(
            crate::loaded::judge_run(&g, &ev)
                .into_iter()
                .map(|v| (v.assertion.clone(), v.outcome, v.message))
                .collect(),
        )
    }));
    Ok(got.unwrap_or_else(|p| Got::Panicked(panic_message(&*p))))
}

/// Compares what a shape gave with what it must give: Ok, or Err(what it gave, in the expectation's terms).
pub fn compare(expect: &Expect, got: &Got) -> Result<(), String> {
    let said = |got: &Got| match got {
        Got::Verdicts(v) => v
            .iter()
            .map(|(a, o, _)| format!("{a} {}", outcome_word(*o)))
            .collect::<Vec<_>>()
            .join(", "),
        Got::EvidenceError(e) => format!("evidence refused: {e}"),
        Got::SpecInvalid(e) => format!("gate refused: {e}"),
        Got::Panicked(m) => format!("the judge panicked: {m}"),
    };
    match (expect, got) {
        (Expect::Verdicts(want), Got::Verdicts(v)) => {
            let mut wrong = Vec::new();
            for (a, o) in want {
                match v.iter().find(|(n, _, _)| n == a) {
                    Some((_, g, _)) if g == o => {}
                    Some((_, _, line)) => wrong.push(line.clone()),
                    None => wrong.push(format!("no {a} verdict")),
                }
            }
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(wrong.join(" | "))
            }
        }
        (Expect::EvidenceError, Got::EvidenceError(_)) => Ok(()),
        (Expect::SpecInvalid, Got::SpecInvalid(_)) => Ok(()),
        (Expect::NoPass, Got::EvidenceError(_)) => Ok(()),
        (Expect::NoPass, Got::Verdicts(v))
            if !v.is_empty() && v.iter().all(|x| x.1 == Outcome::Fail) =>
        {
            Ok(())
        }
        (Expect::NoPass, Got::Verdicts(v)) if !v.is_empty() => Err(v
            .iter()
            .filter(|x| x.1 == Outcome::Pass)
            .map(|x| x.2.clone())
            .collect::<Vec<_>>()
            .join(" | ")),
        _ => Err(said(got)),
    }
}

/// One shape's result.
#[derive(Debug, Clone)]
pub struct ShapeResult {
    /// The shape's name.
    pub name: String,
    /// `seed` or the kind number.
    pub kind: String,
    /// The expectation, as shown.
    pub expected: String,
    /// None when as expected; else what it gave instead.
    pub mismatch: Option<String>,
    /// The verdict lines (or the refusal), for `--verbose`.
    pub detail: Vec<String>,
}

impl ShapeResult {
    /// True when the shape gave what it must.
    pub fn ok(&self) -> bool {
        self.mismatch.is_none()
    }

    /// `ok   <shape>: <expected>` or `FAIL <shape>: expected X, got Y`.
    pub fn line(&self) -> String {
        match &self.mismatch {
            None => format!("ok   {}: {}", self.name, self.expected),
            Some(m) => format!("FAIL {}: expected {}, got {m}", self.name, self.expected),
        }
    }
}

/// Runs the embedded shapes whose name contains `filter` (all with None), each in its own directory under a
/// temporary directory (removed afterwards). A bundle that does not parse is a failed shape.
pub fn run(filter: Option<&str>) -> std::io::Result<Vec<ShapeResult>> {
    let tmp = tempfile::Builder::new()
        .prefix("servegate-self-test")
        .tempdir()?;
    let mut out = Vec::new();
    for (name, text) in SHAPES {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let shape = match parse_shape(text) {
            Ok(s) => s,
            Err(e) => {
                out.push(ShapeResult {
                    name: name.to_string(),
                    kind: "?".into(),
                    expected: "a valid bundle".into(),
                    mismatch: Some(e),
                    detail: Vec::new(),
                });
                continue;
            }
        };
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir)?;
        let got = judge_shape(&shape, &dir)?;
        let detail = match &got {
            Got::Verdicts(v) => v.iter().map(|x| x.2.clone()).collect(),
            Got::EvidenceError(e) => vec![format!("evidence error: {e}")],
            Got::SpecInvalid(e) => vec![format!("spec error: {e}")],
            Got::Panicked(m) => vec![format!("panicked: {m}")],
        };
        out.push(ShapeResult {
            name: name.to_string(),
            kind: shape.kind.clone(),
            expected: shape.expect.to_string(),
            mismatch: compare(&shape.expect, &got).err(),
            detail,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_bundle_parses_and_names_itself() {
        assert!(SHAPES.len() >= 16 + 12, "{}", SHAPES.len());
        for (name, text) in SHAPES {
            let s = parse_shape(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&s.name, name);
            assert!(
                s.files
                    .iter()
                    .any(|(f, _)| f == crate::evidence::layout::GATE_FILE),
                "{name}"
            );
            assert!(
                s.files
                    .iter()
                    .any(|(f, _)| f == crate::evidence::layout::RUN_FILE),
                "{name}"
            );
        }
        for k in 1..=12 {
            let p = format!("kind{k}-");
            assert!(
                SHAPES.iter().any(|(n, _)| n.starts_with(&p)),
                "no shape for kind {k}"
            );
        }
    }

    #[test]
    fn expectations_parse_and_compare_per_assertion() {
        let e = Expect::parse("route=PASS rate=FAIL").unwrap();
        assert_eq!(e.to_string(), "route PASS, rate FAIL");
        assert!(Expect::parse("rate=MAYBE").is_err());
        assert!(Expect::parse("").is_err());
        let got = |r: Outcome| {
            Got::Verdicts(vec![
                ("route".into(), Outcome::Pass, "route PASS x".into()),
                ("rate".into(), r, "rate ... y".into()),
                ("content".into(), Outcome::Pass, "content PASS".into()),
            ])
        };
        assert_eq!(compare(&e, &got(Outcome::Fail)), Ok(()));
        assert_eq!(compare(&e, &got(Outcome::Pass)), Err("rate ... y".into()));
        assert!(compare(&Expect::NoPass, &got(Outcome::Fail)).is_err());
        assert!(compare(&Expect::NoPass, &Got::EvidenceError("x".into())).is_ok());
        assert!(compare(&Expect::NoPass, &Got::Verdicts(vec![])).is_err());
        assert!(compare(&Expect::SpecInvalid, &got(Outcome::Fail)).is_err());
        let e = Expect::parse("known_answer=FAIL").unwrap();
        assert_eq!(
            compare(&e, &got(Outcome::Fail)),
            Err("no known_answer verdict".into())
        );
    }
}
