//! `servegate bless`: turn the evidence of a known-good run into what later runs are judged against, in the
//! open (docs/bless.md). Two things can be blessed:
//!
//! - **a baseline** (`bless GATE --baseline RUN_DIR [--kind NAME]`): the run directory is copied as a new
//!   window of `baselines/<gate>[/<kind>]/` (the [`crate::evidence::baseline`] layout), with the run's
//!   comparability key in `baseline.json`; a window is added to an existing baseline only when the keys match.
//! - **a floor** (`bless GATE --floor RUN_DIR [--slow RUN_DIR]`): `[assert.rate] floor_tok_s` derived from
//!   the evidence by a stated rule ([`derive_floor`]) instead of typed by hand.
//!
//! A run is refused when it is not good evidence ([`refusals`]): incomplete (`run.json` status), its serve
//! failed during it (`serve.failure`), one of its own verdicts fails when re-judged ([`judge_for_bless`]:
//! figure bounds and baseline comparisons set aside), fewer answered requests than the gate plans (and than
//! [`MIN_BASELINE_N`]), or, for a baseline, it is already one of the baseline's windows ([`run_identity`]).
//! A `--kind` is a plain name ([`check_kind`]).
//!
//! Nothing is written without `--accept`: without it the command prints what it would do (the gate file's
//! change as a unified diff, the baseline directory it would create). The gate file is edited in place
//! ([`edit_floor`], located with `toml_edit`): only the value's bytes and the provenance lines above its line
//! change, so comments, order, formatting, inline tables and line endings stay, and the result is re-parsed
//! before it is written. Every accepted change is planned again and written under one lock per baselines
//! root ([`lock`]) and appends one line to `baselines/LEDGER.jsonl`. Never in CI: with `CI` set the command
//! refuses unless `--force`.
//!
//! Layer: records (above judge; writes only through `io::fs`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::analysis;
use crate::analysis::regress;
use crate::error::exit;
use crate::evidence::baseline::{self, Manifest, BASELINE_SCHEMA};
use crate::evidence::comparability::{
    describe, differences, key_of_evidence, load_difference, run_load_per_cpu, KeyUse,
};
use crate::evidence::{layout, RunStatus};
use crate::judge::{self, Outcome};
use crate::spec::{self, GateSpec};
use crate::vocab::{AssertionKind, Metric};

/// The fewest answered requests a baseline window may hold: 4 is the smallest n per side at which an exact
/// one-sided Mann-Whitney test can reach p < 0.05 (3 against 3 cannot: its smallest p is 1/20).
pub const MIN_BASELINE_N: usize = 4;
/// Default headroom of a floor derived from one run: 10 % below the lower confidence bound of the median (a
/// floor equal to today's measurement goes red at once).
pub const DEFAULT_HEADROOM_PCT: f64 = regress::FLOOR_HEADROOM_PCT;
/// Default confidence of the lower bound of the median.
pub const DEFAULT_CONFIDENCE: f64 = regress::FLOOR_CONFIDENCE;
/// The ledger of accepted changes, inside the baselines root.
pub const LEDGER_FILE: &str = "LEDGER.jsonl";
/// The first words of the provenance comment servegate writes above a derived floor ([`provenance`]). An
/// older provenance is recognised by its whole two-line shape ([`is_provenance`]), never by these words
/// alone: a person's comment that starts with them is kept.
pub const PROVENANCE_MARK: &str = "# servegate bless";

/// `servegate bless`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["baseline", "floor"])))]
pub struct BlessArgs {
    /// The gate file (gates/NAME.toml).
    pub gate: PathBuf,
    /// Copy this run directory as a new window of the gate's stored baseline.
    #[arg(long, value_name = "RUN_DIR")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: the machine kind (a subdirectory, e.g. `ci-2core`); none = baselines/<gate>/.
    #[arg(long, value_name = "NAME", requires = "baseline")]
    pub kind: Option<String>,
    /// Derive [assert.rate] floor_tok_s from this run: the lower confidence bound of its median minus
    /// --headroom-pct (or, with --slow, the geometric mean of this fast-route run's median and the slow one's).
    #[arg(long, value_name = "RUN_DIR")]
    pub floor: Option<PathBuf>,
    /// With --floor: a run of the slow route; the floor is the geometric mean of the two medians.
    #[arg(long, value_name = "RUN_DIR", requires = "floor")]
    pub slow: Option<PathBuf>,
    /// Headroom below the lower bound, percent (one-run floors).
    #[arg(long, default_value_t = DEFAULT_HEADROOM_PCT)]
    pub headroom_pct: f64,
    /// Confidence of the lower bound of the median (one-run floors).
    #[arg(long, default_value_t = DEFAULT_CONFIDENCE)]
    pub confidence: f64,
    /// Where baselines and the ledger live.
    #[arg(long, value_name = "DIR", default_value = "baselines")]
    pub baselines_dir: PathBuf,
    /// Write the change (without it, only show it).
    #[arg(long)]
    pub accept: bool,
    /// Write even when `CI` is set.
    #[arg(long)]
    pub force: bool,
}

/// A refusal or failure of `bless`, with the exit code it means.
#[derive(Debug, Clone, PartialEq)]
pub struct BlessError {
    /// What went wrong, in words (every reason when a run is refused).
    pub message: String,
    /// The process exit code ([`exit`]).
    pub code: i32,
}

impl BlessError {
    fn new(code: i32, message: impl Into<String>) -> BlessError {
        BlessError {
            message: message.into(),
            code,
        }
    }
}

impl std::fmt::Display for BlessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One line of `baselines/LEDGER.jsonl`: what was blessed, when, from which evidence, by which rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// UTC time of the change, RFC 3339.
    pub utc: String,
    /// `gate.name`.
    pub gate: String,
    /// The gate file as given.
    pub gate_file: String,
    /// `baseline` or `floor`.
    pub action: String,
    /// The run directory blessed (as given); for a two-run floor, the fast one.
    pub run: String,
    /// A two-run floor's slow run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_run: Option<String>,
    /// Values the rule used (answered requests).
    pub n: usize,
    /// Their median (tok/s for a floor; the decode-rate median of a baseline window).
    pub median: Option<f64>,
    /// The rule, in words.
    pub rule: String,
    /// The new value (a floor, tok/s), or None for a baseline window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The value it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<f64>,
    /// A baseline window: the baseline directory and the window's name in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

/// Refuses to write in CI: `CI` set to a true value ([`crate::error::env_flag`]) without `force`.
pub fn refuse_in_ci(ci: Option<String>, force: bool) -> Result<(), BlessError> {
    if crate::error::env_flag(ci) && !force {
        return Err(BlessError::new(
            exit::USAGE,
            "bless never writes in CI (CI is set): bless on a developer machine and commit the change, or pass --force",
        ));
    }
    Ok(())
}

/// A floor derived from evidence, with everything its provenance comment states.
#[derive(Debug, Clone, PartialEq)]
pub struct FloorDerivation {
    /// The floor, tok/s, rounded to the metric's decimals.
    pub floor: f64,
    /// Values used (fast run).
    pub n: usize,
    /// Median of the (fast) run, tok/s.
    pub median: f64,
    /// A two-run floor: the slow run's n and median.
    pub slow: Option<(usize, f64)>,
    /// The rule, in words, with its numbers (for the provenance comment and the ledger).
    pub rule: String,
}

fn round_to(x: f64, decimals: usize) -> f64 {
    let p = 10f64.powi(decimals as i32);
    (x * p).floor() / p
}

/// Derives a decode-rate floor. From one run: the lower `confidence` bound of the median
/// ([`regress::median_lower_bound`]) minus `headroom_pct` percent (with the defaults,
/// [`regress::derived_floor`] rounded down). From a fast-route and a slow-route run: the
/// geometric mean of the two medians (the floor halfway between them on a log scale: 1.9 and 90 tok/s give
/// 13.1), refused when the two runs' ranges overlap (the floor could not tell them apart). Rounded down to the
/// registry's decimals. Errors: too few values for the confidence, overlapping or swapped runs.
pub fn derive_floor(
    fast: &[f64],
    slow: Option<&[f64]>,
    confidence: f64,
    headroom_pct: f64,
) -> Result<FloorDerivation, String> {
    let dec = Metric::DecodeRate.info().decimals;
    let fmt = |x: f64| format!("{x:.dec$}");
    let m = crate::analysis::stats::median(fast).ok_or("the run has no decode-rate value")?;
    match slow {
        None => {
            if !(0.0..100.0).contains(&headroom_pct) {
                return Err(format!("headroom {headroom_pct} % is not in 0..100"));
            }
            let k = regress::median_lower_rank(
                fast.iter().filter(|x| x.is_finite()).count(),
                confidence,
            );
            let lb = regress::median_lower_bound(fast, confidence);
            let (lb, k) = lb.zip(k).ok_or_else(|| {
                format!(
                    "{} values cannot bound the median at {} % confidence (P = 1 - 0.5^n needs n >= {}): bless a run with more requests",
                    fast.len(),
                    confidence * 100.0,
                    min_n_for(confidence)
                )
            })?;
            let floor = round_to(lb * (1.0 - headroom_pct / 100.0), dec);
            Ok(FloorDerivation {
                floor,
                n: fast.len(),
                median: m,
                slow: None,
                rule: format!(
                    "lower {} % bound of the median (order statistic {k} of {}) {} minus {headroom_pct} % headroom",
                    confidence * 100.0,
                    fast.len(),
                    fmt(lb)
                ),
            })
        }
        Some(slow) => {
            let ms = crate::analysis::stats::median(slow)
                .ok_or("the slow run has no decode-rate value")?;
            let fast_min = fast.iter().copied().fold(f64::INFINITY, f64::min);
            let slow_max = slow.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if fast_min <= slow_max {
                return Err(format!(
                    "the runs overlap: the fast run's slowest request ({} tok/s) is not above the slow run's fastest ({} tok/s); no floor separates them",
                    fmt(fast_min),
                    fmt(slow_max)
                ));
            }
            let g = (m * ms).sqrt();
            Ok(FloorDerivation {
                floor: round_to(g, dec),
                n: fast.len(),
                median: m,
                slow: Some((slow.len(), ms)),
                rule: format!(
                    "geometric mean of the fast median {} and the slow median {} (n={}); no headroom",
                    fmt(m),
                    fmt(ms),
                    slow.len()
                ),
            })
        }
    }
}

/// The smallest n whose median has a lower bound at `confidence` ([`regress::median_lower_rank`]).
fn min_n_for(confidence: f64) -> usize {
    (1..=120usize)
        .find(|n| regress::median_lower_rank(*n, confidence).is_some())
        .unwrap_or(120)
}

/// Why a run is not good evidence to bless (empty: good). `route_must_pass` is false for a slow-route run
/// (whose route trial fails by design). Pure: re-judges `ev` with `gate` ([`judge_for_bless`]).
///
/// Refused: a run whose `run.json` status is not `complete`; a run whose serve failed during it
/// (`serve.failure` set: a crash after the last reply included); any of its own verdicts that FAILs or is
/// VOID (content, known-answer and route must PASS), judged with the figure bounds set aside (a floor, a TTFT
/// or TPOT limit: a loaded machine's slow figures are still evidence of that machine, and a floor is what
/// bless derives) and without the regression and drift trials (they compare with the stored baselines bless
/// renews); fewer answered requests than planned (or than [`MIN_BASELINE_N`]).
pub fn refusals(gate: &GateSpec, ev: &analysis::Evidence, route_must_pass: bool) -> Vec<String> {
    let mut why = Vec::new();
    if ev.run.status != RunStatus::Complete {
        why.push(format!(
            "the run is incomplete (run.json status {:?})",
            ev.run.status
        ));
    }
    if let Some(f) = &ev.run.serve.failure {
        why.push(format!(
            "the serve failed during the run (serve.failure: {})",
            one_line(f)
        ));
    }
    for v in judge_for_bless(gate, ev) {
        if matches!(v.kind, AssertionKind::Regression | AssertionKind::Drift)
            || (!route_must_pass && v.kind == AssertionKind::Route)
        {
            continue;
        }
        let must_pass = matches!(
            v.kind,
            AssertionKind::Content | AssertionKind::KnownAnswer | AssertionKind::Route
        );
        let bad = if must_pass {
            v.outcome != Outcome::Pass
        } else {
            matches!(v.outcome, Outcome::Fail | Outcome::Void)
        };
        // A trial failing for the serve's failure says nothing the first reason does not.
        let for_the_crash =
            ev.run.serve.failure.is_some() && v.message.contains("the serve failed during the run");
        if bad && !for_the_crash {
            let figure = matches!(
                v.kind,
                AssertionKind::Rate | AssertionKind::FirstToken | AssertionKind::Tpot
            );
            why.push(format!(
                "its {} trial does not pass{}: {}",
                v.assertion,
                if figure { " (its bound set aside)" } else { "" },
                capped(&one_line(&v.message), 300)
            ));
        }
    }
    let acc = judge::account(ev);
    let answered = acc.sent.saturating_sub(acc.failed.len());
    // The plan: run.json's, else (older evidence) the gate's prompts x repeats.
    let planned = acc
        .planned
        .max(gate.request.prompts.len() * gate.request.repeats as usize);
    if answered < planned.max(MIN_BASELINE_N) {
        why.push(format!(
            "{answered} answered request{} of {planned} planned; blessing needs every planned request answered and at least {MIN_BASELINE_N}",
            if answered == 1 { "" } else { "s" },
        ));
    }
    why
}

/// The run's own verdicts as bless judges them: `gate` with its figure bounds set aside (`[assert.rate]`
/// floor at the smallest positive tok/s, `[assert.first_token]` and `[assert.tpot]` limits unbounded), so a
/// figure trial that still FAILs does so for its evidence (a failed reply, a crashed serve, client and serve
/// clocks that disagree), never for a slow machine.
pub fn judge_for_bless(gate: &GateSpec, ev: &analysis::Evidence) -> Vec<judge::Verdict> {
    let mut g = gate.clone();
    if let Some(r) = g.assertions.rate.as_mut() {
        r.floor_tok_s = f64::MIN_POSITIVE;
    }
    if let Some(t) = g.assertions.first_token.as_mut() {
        t.limit_ms = f64::MAX;
    }
    if let Some(t) = g.assertions.tpot.as_mut() {
        t.limit_ms = f64::MAX;
    }
    judge::judge(&g, ev)
}

/// `s` cut to at most `max` characters, `...` marking a cut.
fn capped(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(3)).collect();
    t.push_str("...");
    t
}

/// `s` on one line: control characters (a newline, ESC) shown as escapes, for a reason or a comment.
fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<char>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// The decode-rate values the gate's `rate` trial judges on `ev` (answered requests only).
pub fn rate_values(gate: &GateSpec, ev: &analysis::Evidence) -> Vec<f64> {
    judge::judge(gate, ev)
        .into_iter()
        .find(|v| v.kind == AssertionKind::Rate)
        .map(|v| v.values.into_iter().flatten().collect())
        .unwrap_or_else(|| {
            ev.requests
                .iter()
                .filter(|r| !r.record.warmup)
                .filter_map(|r| {
                    let f = crate::analysis::measure::measure(&r.reply);
                    crate::analysis::measure::metric_value(&f, Metric::DecodeRate)
                })
                .collect()
        })
}

/// `text` (a gate file) with `[assert.rate] floor_tok_s` set to `floor`, edited in place: the value's bytes
/// replaced (its trailing comment, an inline table around it and the line's ending kept), and `provenance`
/// (one or more `#` lines) inserted as whole lines above the line that holds the value, after the comments
/// already there, with that line's indentation and line ending (CRLF stays CRLF). An older servegate
/// provenance in that comment block (the exact two-line shape [`provenance`] writes: [`is_provenance`]) is
/// replaced, not stacked; every other comment, a user's comment that starts like it included, stays. The
/// floor may sit in `[assert.rate]`, in an inline table (`rate = { floor_tok_s = 5.0 }` under `[assert]`)
/// or under a dotted key (`rate.floor_tok_s = 5.0`); no comment is ever written inside an inline table.
/// Every byte outside the value and the provenance lines is unchanged, and the result is re-parsed (the
/// floor read back) before it is returned. Returns the new text and the previous value. Errors: not TOML,
/// no `[assert.rate] floor_tok_s`, a value that is not a number, an edit that would not read back.
pub fn edit_floor(
    text: &str,
    floor: f64,
    provenance: &str,
) -> Result<(String, Option<f64>), String> {
    let (span, previous) = floor_span(text)?;
    let repr = toml_edit::Value::from(floor).to_string();
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let indent = &line[..line.len() - line.trim_start_matches([' ', '\t']).len()];
    let eol = match line.find('\n') {
        Some(i) if i > 0 && line.as_bytes()[i - 1] == b'\r' => "\r\n",
        Some(_) => "\n",
        // The value is on the last line, with no ending: the file's own style.
        None if text.contains("\r\n") => "\r\n",
        None => "\n",
    };
    // The block of comment lines directly above the value's line.
    let mut block_start = line_start;
    while block_start > 0 {
        let prev = text[..block_start - 1].rfind('\n').map_or(0, |i| i + 1);
        if text[prev..block_start].trim_start().starts_with('#') {
            block_start = prev;
        } else {
            break;
        }
    }
    let block: Vec<&str> = text[block_start..line_start]
        .split_inclusive('\n')
        .collect();
    let mut kept = String::new();
    let mut i = 0;
    while i < block.len() {
        if i + 1 < block.len() && is_provenance(block[i], block[i + 1]) {
            i += 2;
            continue;
        }
        kept.push_str(block[i]);
        i += 1;
    }
    let mut out = String::with_capacity(text.len() + provenance.len() + 64);
    out.push_str(&text[..block_start]);
    out.push_str(&kept);
    for l in provenance.lines() {
        out.push_str(indent);
        out.push_str(l);
        out.push_str(eol);
    }
    out.push_str(&text[line_start..span.start]);
    out.push_str(&repr);
    out.push_str(&text[span.end..]);
    match floor_span(&out) {
        Ok((_, Some(v))) if v == floor => Ok((out, previous)),
        Ok((_, v)) => Err(format!(
            "the edited file reads floor_tok_s {v:?}, not {floor}: not written"
        )),
        Err(e) => Err(format!(
            "the edited file would not parse ({e}): not written"
        )),
    }
}

/// The byte range of `[assert.rate] floor_tok_s`'s value in `text` (standard, inline or dotted table) and
/// the value as a number.
fn floor_span(text: &str) -> Result<(std::ops::Range<usize>, Option<f64>), String> {
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| format!("not TOML: {e}"))?;
    let rate = doc
        .as_table()
        .get("assert")
        .and_then(|a| a.get("rate"))
        .filter(|r| r.is_table_like())
        .ok_or("the gate has no [assert.rate] table to hold a floor")?;
    let value = rate
        .get("floor_tok_s")
        .ok_or("[assert.rate] has no floor_tok_s")?
        .as_value()
        .ok_or("[assert.rate] floor_tok_s is not a value")?;
    let previous = value.as_float().or(value.as_integer().map(|i| i as f64));
    if previous.is_none() {
        return Err(format!(
            "[assert.rate] floor_tok_s is not a number ({})",
            value.type_name()
        ));
    }
    let span = value
        .span()
        .ok_or("[assert.rate] floor_tok_s has no place in the file")?;
    Ok((span, previous))
}

/// True when `first` and `second` (two consecutive lines, with or without their line endings and
/// indentation) are a provenance comment servegate wrote ([`provenance`]): `# servegate bless DATE: floor F
/// tok/s from RUN (n=N, median M tok/s)` (and `... and SLOW (n=N, median M tok/s)`), then `# servegate bless
/// rule: ` and one of the two rules [`derive_floor`] states. Any other comment, one that only starts with
/// [`PROVENANCE_MARK`] included, is a person's and is kept.
pub fn is_provenance(first: &str, second: &str) -> bool {
    static FIRST: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^# servegate bless [0-9]{4}-[0-9]{2}-[0-9]{2}: floor [0-9]+(\.[0-9]+)? tok/s from .+ \(n=[0-9]+, median [0-9]+(\.[0-9]+)? tok/s\)$",
        )
        .expect("a valid regex")
    });
    static SECOND: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^# servegate bless rule: (lower [0-9.]+ % bound of the median \(order statistic [0-9]+ of [0-9]+\) [0-9.]+ minus [0-9.]+ % headroom|geometric mean of the fast median [0-9.]+ and the slow median [0-9.]+ \(n=[0-9]+\); no headroom)$",
        )
        .expect("a valid regex")
    });
    let clean = |l: &str| {
        l.trim_start_matches([' ', '\t'])
            .trim_end_matches(['\r', '\n'])
            .to_string()
    };
    FIRST.is_match(&clean(first)) && SECOND.is_match(&clean(second))
}

/// A unified diff of a file's change (`similar`), headed with its path.
pub fn diff(old: &str, new: &str, path: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string()
}

/// The provenance comment of a derived floor: `# servegate bless <date>: floor <F> tok/s from <run> (n=.., median ..; rule)`.
pub fn provenance(d: &FloorDerivation, run: &str, slow_run: Option<&str>, utc: &str) -> String {
    let dec = Metric::DecodeRate.info().decimals;
    let date = utc.get(..10).unwrap_or(utc);
    // A path is written into the gate file as a comment: on one line, whatever it holds.
    let (run, slow_run) = (one_line(run), slow_run.map(one_line));
    let mut s = format!(
        "{PROVENANCE_MARK} {date}: floor {:.dec$} tok/s from {run} (n={}, median {:.dec$} tok/s",
        d.floor, d.n, d.median
    );
    if let (Some(slow), Some((n, m))) = (slow_run, d.slow) {
        s.push_str(&format!(") and {slow} (n={n}, median {m:.dec$} tok/s"));
    }
    s.push_str(&format!(")\n{PROVENANCE_MARK} rule: {}", d.rule));
    s
}

/// What `bless --floor` would write (or wrote).
#[derive(Debug, Clone, PartialEq)]
pub struct FloorPlan {
    /// The gate file's text now.
    pub old: String,
    /// Its text with the new floor.
    pub new: String,
    /// The derivation.
    pub derivation: FloorDerivation,
    /// The ledger line.
    pub ledger: LedgerEntry,
}

fn load_run(dir: &Path) -> Result<(GateSpec, analysis::Evidence), BlessError> {
    if crate::evidence::is_pair_dir(dir) {
        return Err(BlessError::new(
            exit::USAGE,
            format!(
                "{} is a pair run: bless takes one serve's run directory",
                dir.display()
            ),
        ));
    }
    let ev =
        analysis::load(dir).map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, e.to_string()))?;
    let g = load_gate(&dir.join(layout::GATE_FILE))?;
    Ok((g, ev))
}

/// A plain gate file for bless. A matrix gate (`[[model]]` entries) is refused by name: bless does not edit
/// an entry's override yet (exit 3, saying what to do instead), rather than a parse error about `model`.
fn load_gate(file: &Path) -> Result<GateSpec, BlessError> {
    spec::load(file).map_err(|e| {
        let matrix = spec::matrix::load_all(file)
            .map(|all| all.len() > 1 || all.iter().any(|g| g.name.contains('[')))
            .unwrap_or(false);
        if matrix {
            BlessError::new(
                exit::SPEC_INVALID,
                format!(
                    "{} is a matrix gate ([[model]] entries): bless does not edit a matrix entry yet; set that \
                     entry's floor_tok_s (or the gate's baseline) by hand from `servegate judge` of the run",
                    file.display()
                ),
            )
        } else {
            BlessError::new(exit::SPEC_INVALID, e.to_string())
        }
    })
}

fn same_gate(gate: &GateSpec, run_gate: &GateSpec, dir: &Path) -> Result<(), BlessError> {
    if gate.name != run_gate.name {
        return Err(BlessError::new(
            exit::USAGE,
            format!(
                "{} is a run of gate `{}`, not `{}`",
                dir.display(),
                run_gate.name,
                gate.name
            ),
        ));
    }
    Ok(())
}

fn refused(dir: &Path, why: Vec<String>) -> Result<(), BlessError> {
    if why.is_empty() {
        return Ok(());
    }
    Err(BlessError::new(
        exit::ASSERTION_FAILED,
        format!("refused to bless {}: {}", dir.display(), why.join("; ")),
    ))
}

/// Plans `bless GATE --floor RUN [--slow RUN]`: checks the runs, derives the floor, edits the text. Writes
/// nothing. `utc` stamps the provenance and the ledger line.
pub fn plan_floor(
    gate_file: &Path,
    run: &Path,
    slow: Option<&Path>,
    confidence: f64,
    headroom_pct: f64,
    utc: &str,
) -> Result<FloorPlan, BlessError> {
    let gate = load_gate(gate_file)?;
    if gate.assertions.rate.is_none() {
        return Err(BlessError::new(
            exit::SPEC_INVALID,
            format!(
                "{} has no [assert.rate]: no floor to derive",
                gate_file.display()
            ),
        ));
    }
    let (rg, ev) = load_run(run)?;
    same_gate(&gate, &rg, run)?;
    refused(run, refusals(&rg, &ev, true))?;
    let fast = rate_values(&rg, &ev);
    let slow_values = match slow {
        Some(s) => {
            let (sg, sev) = load_run(s)?;
            same_gate(&gate, &sg, s)?;
            refused(s, refusals(&sg, &sev, false))?;
            Some(rate_values(&sg, &sev))
        }
        None => None,
    };
    let d = derive_floor(&fast, slow_values.as_deref(), confidence, headroom_pct)
        .map_err(|e| BlessError::new(exit::ASSERTION_FAILED, format!("no floor derived: {e}")))?;
    let old = std::fs::read_to_string(gate_file).map_err(|e| {
        BlessError::new(exit::SPEC_INVALID, format!("{}: {e}", gate_file.display()))
    })?;
    let run_s = run.display().to_string();
    let slow_s = slow.map(|s| s.display().to_string());
    let prov = provenance(&d, &run_s, slow_s.as_deref(), utc);
    let (new, previous) = edit_floor(&old, d.floor, &prov).map_err(|e| {
        BlessError::new(exit::SPEC_INVALID, format!("{}: {e}", gate_file.display()))
    })?;
    // The edited file is still this gate with the new floor, or nothing is written.
    let reread =
        spec::parse(gate_file, &new, &spec::Context::for_file(gate_file)).map_err(|e| {
            BlessError::new(
                exit::SPEC_INVALID,
                format!(
                    "{}: the edited gate would not load ({e}): not written",
                    gate_file.display()
                ),
            )
        })?;
    if reread.assertions.rate.map(|r| r.floor_tok_s) != Some(d.floor) || reread.name != gate.name {
        return Err(BlessError::new(
            exit::SPEC_INVALID,
            format!(
                "{}: the edited gate does not read back floor_tok_s = {}: not written",
                gate_file.display(),
                d.floor
            ),
        ));
    }
    let ledger = LedgerEntry {
        utc: utc.to_string(),
        gate: gate.name.clone(),
        gate_file: gate_file.display().to_string(),
        action: "floor".into(),
        run: run_s,
        slow_run: slow_s,
        n: d.n,
        median: Some(d.median),
        rule: d.rule.clone(),
        value: Some(d.floor),
        previous,
        window: None,
    };
    Ok(FloorPlan {
        old,
        new,
        derivation: d,
        ledger,
    })
}

/// Appends `entry` to `<root>/LEDGER.jsonl` (the whole file rewritten through `io::fs::write_atomic`: a
/// reader never sees half a line). The caller holds [`lock`] (read, appended and written under it, no line
/// of a concurrent bless is lost).
pub fn append_ledger(root: &Path, entry: &LedgerEntry) -> Result<PathBuf, BlessError> {
    let path = root.join(LEDGER_FILE);
    let mut text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(BlessError::new(
                exit::EVIDENCE_ERROR,
                format!("{}: {e}", path.display()),
            ))
        }
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&serde_json::to_string(entry).unwrap_or_default());
    text.push('\n');
    std::fs::create_dir_all(root)
        .and_then(|_| crate::io::fs::write_atomic(&path, text.as_bytes()))
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{}: {e}", path.display())))?;
    Ok(path)
}

/// What `bless --baseline` would write (or wrote).
#[derive(Debug, Clone, PartialEq)]
pub struct BaselinePlan {
    /// The baseline directory (`<root>/<gate>[/<kind>]`).
    pub dir: PathBuf,
    /// The window's name inside it.
    pub window: String,
    /// The manifest after the window is added.
    pub manifest: Manifest,
    /// True when the baseline is new.
    pub created: bool,
    /// The ledger line.
    pub ledger: LedgerEntry,
}

/// What a `--kind` name must be, as its refusal states it.
pub const KIND_RULE: &str =
    "a --kind is a plain name: 1 to 64 ASCII letters, digits, '-' or '_', starting with a letter \
(no space, newline, dot or path separator), and not a window's name or stamp (YYYYMMDDTHHMMSSZ)";

/// Checks a `--kind` name against [`KIND_RULE`] (a subdirectory of `baselines/<gate>/`, beside the windows,
/// so it must not look like one). Errors: the name (escaped) and the rule.
pub fn check_kind(kind: &str) -> Result<(), String> {
    static STAMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$").expect("a valid regex")
    });
    let shown = one_line(kind);
    if STAMP.is_match(kind) {
        return Err(format!(
            "--kind {shown} is a window stamp (a run directory's name): {KIND_RULE}"
        ));
    }
    let plain = (1..=64).contains(&kind.len())
        && kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(format!("--kind {shown:?} is not plain: {KIND_RULE}"));
    }
    Ok(())
}

/// A run's identity: the lower-case hex sha256 of its `run.json` (a window is a whole copy of its run
/// directory, so the same run blessed twice has the same identity wherever it was copied from). Errors:
/// the file cannot be read (exit 5).
pub fn run_identity(dir: &Path) -> Result<String, BlessError> {
    let p = dir.join(layout::RUN_FILE);
    crate::io::hash::sha256_file(&p)
        .map(|(h, _)| h)
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{}: {e}", p.display())))
}

/// Plans `bless GATE --baseline RUN [--kind K]`: checks the kind ([`check_kind`]) and the run
/// ([`refusals`]; a run already a window of the baseline is refused, by [`run_identity`]), computes its key,
/// and checks it against an existing baseline's. Writes nothing.
pub fn plan_baseline(
    gate_file: &Path,
    run: &Path,
    kind: Option<&str>,
    root: &Path,
    utc: &str,
) -> Result<BaselinePlan, BlessError> {
    let gate = load_gate(gate_file)?;
    let (rg, ev) = load_run(run)?;
    same_gate(&gate, &rg, run)?;
    if let Some(k) = kind {
        check_kind(k).map_err(|e| BlessError::new(exit::USAGE, e))?;
        let parent = root.join(&gate.name);
        if parent.join(baseline::MANIFEST_FILE).is_file() {
            let windows = baseline::load(&parent)
                .map(|b| b.manifest.windows)
                .unwrap_or_default();
            if windows.iter().any(|w| w == k) {
                return Err(BlessError::new(
                    exit::USAGE,
                    format!(
                        "--kind {k} names a window of {}: {KIND_RULE}",
                        parent.display()
                    ),
                ));
            }
        }
    }
    refused(run, refusals(&rg, &ev, true))?;
    let key = key_of_evidence(&rg, &ev.run, ev.serve_log.as_deref());
    let mut dir = root.join(&gate.name);
    if let Some(k) = kind {
        dir = dir.join(k);
    }
    let identity = run_identity(run)?;
    let base_name = run
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "window".into());
    let existing = if dir.join(baseline::MANIFEST_FILE).is_file() {
        Some(
            baseline::load(&dir)
                .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, e.to_string()))?,
        )
    } else {
        None
    };
    let created = existing.is_none();
    let mut manifest = match existing {
        Some(b) => {
            // One run is one window: the same run blessed again would count its requests twice (a
            // between-window spread of 0, a decided verdict where one window cannot decide).
            for (name, w) in b.manifest.windows.iter().zip(&b.window_dirs) {
                if run_identity(w).ok().as_deref() == Some(identity.as_str()) {
                    return Err(BlessError::new(
                        exit::ASSERTION_FAILED,
                        format!(
                            "refused to bless {}: it is already window {name} of {} (the same run.json, sha256 {}): one run is one window",
                            run.display(),
                            dir.display(),
                            &identity[..12.min(identity.len())]
                        ),
                    ));
                }
            }
            let mut d = differences(&b.key, &key, KeyUse::Window);
            // A window at another host load is another baseline (the judge's bound: the gate's
            // max_load_ratio), so that one baseline's windows are comparable among themselves.
            let max_ratio = gate
                .assertions
                .regression
                .as_ref()
                .map_or(spec::regression::DEFAULT_MAX_LOAD_RATIO, |r| {
                    r.max_load_ratio
                });
            d.extend(load_difference(
                b.load_per_cpu(),
                run_load_per_cpu(&ev.run),
                KeyUse::Speed,
                max_ratio,
            ));
            if !d.is_empty() {
                return Err(BlessError::new(
                    exit::INCOMPARABLE,
                    format!(
                        "refused to add {} to {}: the run is {} (bless it as another --kind)",
                        run.display(),
                        dir.display(),
                        describe(&d)
                    ),
                ));
            }
            b.manifest
        }
        None => Manifest {
            schema: BASELINE_SCHEMA.into(),
            gate: gate.name.clone(),
            kind: kind.unwrap_or("").to_string(),
            blessed_utc: utc.to_string(),
            key,
            windows: Vec::new(),
            sources: Vec::new(),
            notes: Vec::new(),
        },
    };
    let mut window = base_name.clone();
    let mut i = 2;
    while manifest.windows.contains(&window) || dir.join(&window).exists() {
        window = format!("{base_name}-{i}");
        i += 1;
    }
    manifest.windows.push(window.clone());
    manifest.sources.push(run.display().to_string());
    manifest.blessed_utc = utc.to_string();
    let values = rate_values(&rg, &ev);
    let ledger = LedgerEntry {
        utc: utc.to_string(),
        gate: gate.name.clone(),
        gate_file: gate_file.display().to_string(),
        action: "baseline".into(),
        run: run.display().to_string(),
        slow_run: None,
        n: values.len(),
        median: crate::analysis::stats::median(&values),
        rule: format!(
            "window {} of the baseline: every planned request answered, content/known-answer/route trials pass",
            manifest.windows.len()
        ),
        value: None,
        previous: None,
        window: Some(format!("{}/{window}", dir.display())),
    };
    Ok(BaselinePlan {
        dir,
        window,
        manifest,
        created,
        ledger,
    })
}

/// Copies the run directory `from` (files and subdirectories, no symlinks followed) to `to`, which must not
/// exist: into a temporary sibling first, renamed into place when whole.
fn copy_run_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::create_dir(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            let t = e.file_type()?;
            let dest = to.join(e.file_name());
            if t.is_dir() {
                copy_tree(&e.path(), &dest)?;
            } else if t.is_file() {
                std::fs::copy(e.path(), &dest)?;
            }
        }
        Ok(())
    }
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".{}.partial",
        to.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    copy_tree(from, &tmp)?;
    std::fs::rename(&tmp, to)
}

/// Writes a planned baseline window: the run directory copied (whole, or not at all), then the manifest.
pub fn write_baseline(run: &Path, plan: &BaselinePlan) -> Result<(), BlessError> {
    let to = plan.dir.join(&plan.window);
    copy_run_dir(run, &to).map_err(|e| {
        BlessError::new(
            exit::EVIDENCE_ERROR,
            format!("copying to {}: {e}", to.display()),
        )
    })?;
    baseline::write_manifest(&plan.dir, &plan.manifest)
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, e.to_string()))
}

/// `servegate bless`: plans, shows, and with `--accept` writes. Returns the exit code: 0 shown or written,
/// 1 the run was refused, 2 usage (CI without --force), 3 a spec problem, 5 evidence I/O, 9 a window whose
/// key differs from its baseline's.
pub fn cli(args: &BlessArgs) -> i32 {
    match run_cli(args, std::env::var("CI").ok(), &crate::io::host::now_utc()) {
        Ok(()) => exit::PASS,
        Err(e) => {
            crate::errln!("error: {e}");
            e.code
        }
    }
}

/// The lock file of a baselines root. Every accepted bless (a baseline window and its manifest, a floor's
/// gate file, the ledger line) is planned again and written holding an exclusive `flock` on it
/// ([`crate::io::hold::take`]), so concurrent blesses into one baseline or ledger serialise and each sees
/// what the others wrote.
pub const LOCK_FILE: &str = ".bless.lock";
/// How long an accepting bless waits for another to finish before it fails (exit 5), naming the holder.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Takes the bless lock of `root` ([`LOCK_FILE`]) for `gate`, waiting up to [`LOCK_WAIT`] (a line on stderr
/// about every 10 s names the holder). Released when dropped, and by the kernel on any exit.
pub fn lock(root: &Path, gate: &str) -> Result<crate::io::hold::Hold, BlessError> {
    let path = root.join(LOCK_FILE);
    crate::io::hold::take(&path, &format!("bless {gate}"), LOCK_WAIT, &mut |l| {
        crate::errln!("bless: {l}")
    })
    .map_err(|e| {
        BlessError::new(
            exit::EVIDENCE_ERROR,
            format!("bless: another bless is writing to {}: {e}", root.display()),
        )
    })
}

/// [`cli`] with the environment's `CI` and the clock passed in.
pub fn run_cli(args: &BlessArgs, ci: Option<String>, utc: &str) -> Result<(), BlessError> {
    if args.accept {
        refuse_in_ci(ci, args.force)?;
    }
    let gate_name = || {
        spec::load(&args.gate)
            .map(|g| g.name)
            .unwrap_or_else(|_| args.gate.display().to_string())
    };
    if let Some(run) = &args.floor {
        let plan_now = || {
            plan_floor(
                &args.gate,
                run,
                args.slow.as_deref(),
                args.confidence,
                args.headroom_pct,
                utc,
            )
        };
        let mut plan = plan_now()?;
        // Planned first so a refusal never waits for the lock (nor makes its file); accepting, planned again
        // under the lock, from the gate file as it is once the others are done.
        let _lock = if args.accept {
            let l = lock(&args.baselines_dir, &gate_name())?;
            plan = plan_now()?;
            Some(l)
        } else {
            None
        };
        let path = args.gate.display().to_string();
        crate::out!("{}", diff(&plan.old, &plan.new, &path));
        crate::outln!(
            "floor: {} tok/s ({})",
            plan.derivation.floor,
            plan.derivation.rule
        );
        if !args.accept {
            crate::outln!("not written: pass --accept to apply");
            return Ok(());
        }
        crate::io::fs::write_atomic(&args.gate, plan.new.as_bytes())
            .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{path}: {e}")))?;
        let l = append_ledger(&args.baselines_dir, &plan.ledger)?;
        crate::outln!("written: {path}; ledger: {}", l.display());
        return Ok(());
    }
    if let Some(run) = &args.baseline {
        let plan_now = || {
            plan_baseline(
                &args.gate,
                run,
                args.kind.as_deref(),
                &args.baselines_dir,
                utc,
            )
        };
        let mut plan = plan_now()?;
        // Planned first so a refusal never waits for the lock (nor makes its file); accepting, planned again
        // under the lock, from the manifest as the other writers left it.
        let _lock = if args.accept {
            let l = lock(&args.baselines_dir, &gate_name())?;
            plan = plan_now()?;
            Some(l)
        } else {
            None
        };
        crate::outln!(
            "baseline {}: {} window {} (from {}; {} window{} in all; key: {})",
            plan.dir.display(),
            if plan.created { "new, first" } else { "adds" },
            plan.window,
            run.display(),
            plan.manifest.windows.len(),
            if plan.manifest.windows.len() == 1 {
                ""
            } else {
                "s"
            },
            serde_json::to_string(&plan.manifest.key).unwrap_or_default()
        );
        if !args.accept {
            crate::outln!("not written: pass --accept to apply");
            return Ok(());
        }
        write_baseline(run, &plan)?;
        let l = append_ledger(&args.baselines_dir, &plan.ledger)?;
        crate::outln!(
            "written: {}/{}; ledger: {}",
            plan.dir.display(),
            plan.window,
            l.display()
        );
        return Ok(());
    }
    Err(BlessError::new(
        exit::USAGE,
        "bless needs --baseline or --floor",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_lower_bound_is_the_sign_test_order_statistic() {
        // Published values (sign-test tables; Conover Table A3): one-sided 95 % lower bound of the median is
        // X(1) for n = 5..7, X(2) for n = 8..10 (n=10: P = 0.989; X(3) gives 0.945), X(6) for n = 20 (P =
        // 0.979; X(7) gives 0.942), X(11) for n = 30 (P = 0.951), and no order statistic for n <= 4.
        let v = |n: usize| (1..=n).map(|i| i as f64).collect::<Vec<f64>>();
        for (n, k) in [
            (5, 1),
            (6, 1),
            (7, 1),
            (8, 2),
            (9, 2),
            (10, 2),
            (20, 6),
            (30, 11),
        ] {
            assert_eq!(
                regress::median_lower_bound(&v(n), 0.95),
                Some(k as f64),
                "n={n}"
            );
            assert_eq!(regress::median_lower_rank(n, 0.95), Some(k), "n={n}");
        }
        assert_eq!(regress::median_lower_bound(&v(4), 0.95), None);
        assert_eq!(regress::median_lower_bound(&v(4), 0.90), Some(1.0));
        assert_eq!(regress::median_lower_bound(&[], 0.95), None);
        // Order does not matter; the value is the k-th smallest.
        assert_eq!(
            regress::median_lower_bound(&[50.0, 40.0, 45.0, 30.0, 47.0, 44.0], 0.95),
            Some(30.0)
        );
    }

    #[test]
    fn a_one_run_floor_is_the_lower_bound_minus_headroom() {
        let d = derive_floor(&[50.0, 40.0, 45.0, 30.0, 47.0, 44.0], None, 0.95, 10.0).unwrap();
        assert_eq!(d.floor, 27.0);
        assert_eq!(d.median, 44.5);
        assert!(d.rule.contains("order statistic 1 of 6"), "{}", d.rule);
        let e = derive_floor(&[50.0, 40.0, 45.0], None, 0.95, 10.0).unwrap_err();
        assert!(e.contains("n >= 5"), "{e}");
    }

    #[test]
    fn a_two_run_floor_is_the_geometric_mean_and_overlap_is_refused() {
        let d = derive_floor(&[87.0, 90.0, 101.0], Some(&[1.8, 1.9, 2.0]), 0.95, 10.0).unwrap();
        assert_eq!(d.floor, 13.0); // sqrt(90 * 1.9) = 13.08, rounded down to the registry's 1 decimal
        assert!(d.rule.contains("geometric mean"));
        let e = derive_floor(&[20.0, 90.0], Some(&[1.9, 25.0]), 0.95, 10.0).unwrap_err();
        assert!(e.contains("overlap"), "{e}");
    }

    #[test]
    fn ci_refuses_unless_forced() {
        assert!(refuse_in_ci(Some("true".into()), false).is_err());
        assert!(refuse_in_ci(Some("true".into()), true).is_ok());
        assert!(refuse_in_ci(None, false).is_ok());
        assert!(refuse_in_ci(Some("0".into()), false).is_ok());
    }

    fn prov(floor: f64, run: &str) -> String {
        let d = derive_floor(&[50.0, 40.0, 45.0, 30.0, 47.0, 44.0], None, 0.95, 10.0).unwrap();
        provenance(
            &FloorDerivation { floor, ..d },
            run,
            None,
            "2026-12-01T11:00:00Z",
        )
    }

    /// The lines of `new` that are not lines of `old` (a byte-level view of what an edit touched).
    fn added<'a>(old: &str, new: &'a str) -> Vec<&'a str> {
        let old: Vec<&str> = old.split_inclusive('\n').collect();
        new.split_inclusive('\n')
            .filter(|l| !old.contains(l))
            .collect()
    }

    #[test]
    fn editing_the_floor_keeps_comments_and_replaces_an_old_provenance() {
        let text = "[gate]\nname = \"g\"\n\n[assert.rate]\n# why this floor\nfloor_tok_s = 15.0   # trailing\nsource = \"both\"\n";
        let p1 = prov(27.9, "runs/x");
        let (new, prev) = edit_floor(text, 27.9, &p1).unwrap();
        assert_eq!(prev, Some(15.0));
        assert_eq!(
            new,
            format!("[gate]\nname = \"g\"\n\n[assert.rate]\n# why this floor\n{p1}\nfloor_tok_s = 27.9   # trailing\nsource = \"both\"\n")
        );
        let p2 = prov(30.0, "runs/y");
        let (again, prev) = edit_floor(&new, 30.0, &p2).unwrap();
        assert_eq!(prev, Some(27.9));
        assert!(
            again.contains(&format!(
                "# why this floor\n{p2}\nfloor_tok_s = 30.0   # trailing\n"
            )),
            "{again}"
        );
        assert!(!again.contains("runs/x"), "{again}");
        assert!(edit_floor("[gate]\nname = \"g\"\n", 1.0, "#").is_err());
        assert!(edit_floor("[assert.rate]\nfloor_tok_s = \"fast\"\n", 1.0, "#").is_err());
    }

    #[test]
    fn a_floor_in_an_inline_table_stays_an_inline_table() {
        let text = "[gate]\nname = \"g\"\n\n[assert]\n# the floor\nrate = { floor_tok_s = 5.0, source = \"client\" }  # inline\n";
        let p = prov(7.2, "runs/x");
        let (new, prev) = edit_floor(text, 7.2, &p).unwrap();
        assert_eq!(prev, Some(5.0));
        assert_eq!(
            new,
            format!("[gate]\nname = \"g\"\n\n[assert]\n# the floor\n{p}\nrate = {{ floor_tok_s = 7.2, source = \"client\" }}  # inline\n")
        );
        // A dotted key: the provenance goes above its line, too.
        let dotted = "[assert]\n  rate.floor_tok_s = 5   # int\n";
        let (new, prev) = edit_floor(dotted, 20.0, &p).unwrap();
        assert_eq!(prev, Some(5.0));
        let lines: Vec<&str> = new.lines().collect();
        assert_eq!(lines[3], "  rate.floor_tok_s = 20.0   # int", "{new}");
        assert!(
            lines[1].starts_with("  # servegate bless 2026-12-01: floor 7.2"),
            "{new}"
        );
        let again = edit_floor(&new, 21.0, &p).unwrap().0;
        assert_eq!(again.matches("# servegate bless").count(), 2, "{again}");
    }

    #[test]
    fn a_crlf_gate_stays_crlf_and_only_the_floor_lines_change() {
        let text = "[gate]\r\nname = \"g\"\r\n\r\n[assert.rate]\r\n# why\r\nfloor_tok_s = 15.0 # t\r\nsource = \"client\"\r\n";
        let p = prov(27.9, "runs/x");
        let (new, _) = edit_floor(text, 27.9, &p).unwrap();
        assert_eq!(
            new.matches('\n').count(),
            new.matches("\r\n").count(),
            "{new:?}"
        );
        let touched = added(text, &new);
        assert_eq!(touched.len(), 3, "{touched:?}");
        assert!(touched.iter().all(|l| l.ends_with("\r\n")), "{touched:?}");
        assert_eq!(touched[2], "floor_tok_s = 27.9 # t\r\n");
        // Every original line but the value's is still there, in order.
        let kept: Vec<&str> = new
            .split_inclusive('\n')
            .filter(|l| !touched.contains(l))
            .collect();
        let before: Vec<&str> = text
            .split_inclusive('\n')
            .filter(|l| !l.starts_with("floor_tok_s"))
            .collect();
        assert_eq!(kept, before);
        // The value on the last line, without an ending: the file's CRLF is used for the new lines.
        let last = "[assert.rate]\r\nfloor_tok_s = 1.0";
        let (new, _) = edit_floor(last, 2.0, &p).unwrap();
        assert!(new.ends_with("\r\nfloor_tok_s = 2.0"), "{new:?}");
        assert_eq!(
            new.matches('\n').count(),
            new.matches("\r\n").count(),
            "{new:?}"
        );
    }

    #[test]
    fn only_servegates_own_provenance_is_replaced() {
        let mine = "# servegate bless: keep this above 4 tok/s, the slow route gives 1.9\n# servegate bless rule: by hand\n";
        let old = prov(10.0, "runs/old");
        let text = format!("[assert.rate]\n{mine}{old}\nfloor_tok_s = 10.0\n");
        let p = prov(12.0, "runs/new");
        let (new, _) = edit_floor(&text, 12.0, &p).unwrap();
        assert_eq!(
            new,
            format!("[assert.rate]\n{mine}{p}\nfloor_tok_s = 12.0\n")
        );
        // Exactly the two-line shape: either line alone is a person's.
        let l: Vec<&str> = old.lines().collect();
        assert!(is_provenance(l[0], l[1]));
        assert!(!is_provenance(l[0], "# servegate bless rule: by hand"));
        assert!(!is_provenance(
            "# servegate bless 2026-12-01: floor 1 tok/s",
            l[1]
        ));
        // A run path with a newline stays on its comment line.
        let odd = prov(3.0, "runs/a\nfloor_tok_s = 99.0");
        assert_eq!(odd.lines().count(), 2, "{odd}");
        let (new, _) = edit_floor("[assert.rate]\nfloor_tok_s = 1.0\n", 3.0, &odd).unwrap();
        assert_eq!(new.matches("floor_tok_s = ").count(), 2, "{new}");
        assert!(new.ends_with("\nfloor_tok_s = 3.0\n"), "{new}");
    }

    #[test]
    fn kind_names_are_plain() {
        for ok in ["ci-2core", "big_box", "a", "A100"] {
            assert_eq!(check_kind(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "two words",
            "x\ny",
            "a/b",
            "..",
            ".hidden",
            "a\\b",
            "baseline.json",
            "2core",
            "20261201T180000Z",
            "20261201T180000Z-2",
            "é",
        ] {
            let e = check_kind(bad).unwrap_err();
            assert!(e.contains("a --kind is a plain name"), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(check_kind("20261201T180000Z")
            .unwrap_err()
            .contains("window stamp"));
        assert!(check_kind(&"k".repeat(65)).is_err());
    }
}
