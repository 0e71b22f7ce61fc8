//! Blessing a floor: `[assert.rate] floor_tok_s` derived from a run by a stated rule ([`derive_floor`]), the
//! gate file edited in place with its provenance above the value ([`edit_floor`]), planned as one change
//! ([`plan_floor`]).

use super::*;

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
pub(crate) fn derive_floor(
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

/// A limit derived from evidence (a lower-is-better figure: first token, ms), with what its provenance
/// comment states: [`derive_floor`]'s one-run rule mirrored.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitDerivation {
    /// The limit, in the metric's unit, rounded up to the metric's decimals.
    pub limit: f64,
    /// Values used.
    pub n: usize,
    /// Their median.
    pub median: f64,
    /// The rule, in words, with its numbers.
    pub rule: String,
}

fn round_up_to(x: f64, decimals: usize) -> f64 {
    let p = 10f64.powi(decimals as i32);
    (x * p).ceil() / p
}

/// Derives a limit for a lower-is-better `metric` (`[assert.first_token] limit_ms`) from one run's values by
/// the floor's one-run rule mirrored: the upper `confidence` bound of the median (the order statistic
/// `x_(n+1-k)`, `k` = [`regress::median_lower_rank`]: the sign-test bound, distribution-free) plus
/// `headroom_pct` percent, rounded up to the registry's decimals. Errors: too few finite values for the
/// confidence (95 %: n >= 5), a headroom outside 0..100.
pub fn derive_limit(
    values: &[f64],
    metric: Metric,
    confidence: f64,
    headroom_pct: f64,
) -> Result<LimitDerivation, String> {
    if !(0.0..100.0).contains(&headroom_pct) {
        return Err(format!("headroom {headroom_pct} % is not in 0..100"));
    }
    let info = metric.info();
    let dec = info.decimals;
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let m = crate::analysis::stats::median(&v).ok_or("the run has no value")?;
    let n = v.len();
    let k = regress::median_lower_rank(n, confidence).ok_or_else(|| {
        format!(
            "{n} values cannot bound the median at {} % confidence (P = 1 - 0.5^n needs n >= {})",
            confidence * 100.0,
            min_n_for(confidence)
        )
    })?;
    let ub = v[n - k];
    Ok(LimitDerivation {
        limit: round_up_to(ub * (1.0 + headroom_pct / 100.0), dec),
        n,
        median: m,
        rule: format!(
            "upper {} % bound of the median (order statistic {} of {n}) {ub:.dec$} {} plus {headroom_pct} % headroom",
            confidence * 100.0,
            n + 1 - k,
            info.unit
        ),
    })
}

/// The smallest n whose median has a lower bound at `confidence` ([`regress::median_lower_rank`]).
fn min_n_for(confidence: f64) -> usize {
    (1..=120usize)
        .find(|n| regress::median_lower_rank(*n, confidence).is_some())
        .unwrap_or(120)
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
    edit_value(
        text,
        ("rate", "floor_tok_s", "floor"),
        floor,
        provenance,
        is_provenance,
    )
}

/// [`edit_floor`] for any `[assert.TABLE] KEY` number (`at`: table, key, and what the value is, `floor` or
/// `limit`, for the errors), an older provenance recognised by `is_old` (two consecutive lines).
pub(crate) fn edit_value(
    text: &str,
    at: (&str, &str, &str),
    value: f64,
    provenance: &str,
    is_old: fn(&str, &str) -> bool,
) -> Result<(String, Option<f64>), String> {
    let key = at.1;
    let (span, previous) = value_span(text, at)?;
    let repr = toml_edit::Value::from(value).to_string();
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
        if i + 1 < block.len() && is_old(block[i], block[i + 1]) {
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
    match value_span(&out, at) {
        Ok((_, Some(v))) if v == value => Ok((out, previous)),
        Ok((_, v)) => Err(format!(
            "the edited file reads {key} {v:?}, not {value}: not written"
        )),
        Err(e) => Err(format!(
            "the edited file would not parse ({e}): not written"
        )),
    }
}

/// The byte range of `[assert.TABLE] KEY`'s value in `text` (standard, inline or dotted table) and the value
/// as a number (`at`: table, key, what the value is).
fn value_span(
    text: &str,
    (table, key, what): (&str, &str, &str),
) -> Result<(std::ops::Range<usize>, Option<f64>), String> {
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| format!("not TOML: {e}"))?;
    let t = doc
        .as_table()
        .get("assert")
        .and_then(|a| a.get(table))
        .filter(|r| r.is_table_like())
        .ok_or_else(|| format!("the gate has no [assert.{table}] table to hold a {what}"))?;
    let value = t
        .get(key)
        .ok_or_else(|| format!("[assert.{table}] has no {key}"))?
        .as_value()
        .ok_or_else(|| format!("[assert.{table}] {key} is not a value"))?;
    let previous = value.as_float().or(value.as_integer().map(|i| i as f64));
    if previous.is_none() {
        return Err(format!(
            "[assert.{table}] {key} is not a number ({})",
            value.type_name()
        ));
    }
    let span = value
        .span()
        .ok_or_else(|| format!("[assert.{table}] {key} has no place in the file"))?;
    Ok((span, previous))
}

/// True when `first` and `second` (two consecutive lines, with or without their line endings and
/// indentation) are a provenance comment servegate wrote ([`provenance`]): `# servegate bless DATE: floor F
/// tok/s from RUN (n=N, median M tok/s)` (and `... and SLOW (n=N, median M tok/s)`), then `# servegate bless
/// rule: ` and one of the two rules [`derive_floor`] states. Any other comment, one that only starts with
/// [`PROVENANCE_MARK`] included, is a person's and is kept.
pub(crate) fn is_provenance(first: &str, second: &str) -> bool {
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
    comment_pair_matches(&FIRST, &SECOND, first, second)
}

/// True when two consecutive lines (with or without their line endings and indentation) match a provenance
/// comment's two lines, `first_re` and `second_re`: the test [`is_provenance`] and
/// `limits::is_limit_provenance` share.
pub(crate) fn comment_pair_matches(
    first_re: &regex::Regex,
    second_re: &regex::Regex,
    first: &str,
    second: &str,
) -> bool {
    let clean = |l: &str| {
        l.trim_start_matches([' ', '\t'])
            .trim_end_matches(['\r', '\n'])
            .to_string()
    };
    first_re.is_match(&clean(first)) && second_re.is_match(&clean(second))
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
pub(crate) fn provenance(
    d: &FloorDerivation,
    run: &str,
    slow_run: Option<&str>,
    utc: &str,
) -> String {
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
    let RunToBless {
        gate: rg,
        ev,
        inputs,
    } = load_run(run)?;
    same_gate(&gate, &rg, run)?;
    refused(run, refusals(&rg, &ev, &inputs, true))?;
    let fast = rate_values(&rg, &ev);
    let slow_values = match slow {
        Some(s) => {
            let RunToBless {
                gate: sg,
                ev: sev,
                inputs: sin,
            } = load_run(s)?;
            same_gate(&gate, &sg, s)?;
            refused(s, refusals(&sg, &sev, &sin, false))?;
            Some(rate_values(&sg, &sev))
        }
        None => None,
    };
    let d = derive_floor(&fast, slow_values.as_deref(), confidence, headroom_pct)
        .map_err(|e| BlessError::new(exit::ASSERTION_FAILED, format!("no floor derived: {e}")))?;
    let old =
        crate::io::input::read_to_string(gate_file, crate::spec::MAX_GATE_BYTES).map_err(|e| {
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
