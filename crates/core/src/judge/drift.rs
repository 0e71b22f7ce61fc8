//! Judging `[assert.drift]`: per prompt, this run's greedy replies against the baseline's reply to the same
//! prompt, with `analysis::drift::compare` (docs/drift.md). Pure: the baselines come loaded
//! (`loaded::load_baseline`, by the caller: `loaded::judge_inputs`). Comparability first: a run whose key (what
//! the gate fixes: model sha256, prompts, max_tokens, temperature, stream, device) differs from every
//! baseline's is **incomparable**, never a pass (a FAIL naming the fields unless `on_incomparable = "skip"`).
//! What the release changed (engine version, the numerics settings read from the serve log: flash
//! attention, KV cache type) is judged and stated beside the verdict: `the release changed flash_attention
//! enabled → disabled`.
//!
//! Verdict line: `drift FAIL 1 of 3 prompts diverged (prompt 2 at token 7: baseline " process" -0.51, this run
//! " Lyon" -0.90, " Lyon" not in baseline's top 5 (baseline: "…[ process]…"; this run: "…[ Lyon]…")); 2
//! identical; per prompt: 1 identical, 2 diverged at token 7, 3 identical; rule logprobs_close, top 5; common
//! prefix: top-1 agreement ...; baseline DIR (1 window); n=3 prompts (6 replies)`.

use crate::analysis::drift::{self, Comparison, Figures, Rule, State};
use crate::analysis::reply::Reply;
use crate::analysis::BaselineSlot;
use crate::analysis::Evidence;
use crate::evidence::comparability::{self, ComparabilityKey, KeyUse};
use crate::spec::GateSpec;
use crate::vocab::AssertionKind;

use super::accounting::request_failure;
use super::verdict::{Outcome, Verdict};

/// A baseline's key: the one its windows' own evidence gives (`evidence::baseline::Baseline::key`, the
/// numerics settings of its first window's serve log included), never the manifest's copy.
fn baseline_key(b: &crate::analysis::LoadedBaseline) -> ComparabilityKey {
    b.baseline.key.clone()
}

/// The baseline's reply to `prompt`: the first judged, unfailed reply to it, from the oldest window on.
fn baseline_reply<'a>(b: &'a crate::analysis::LoadedBaseline, prompt: &str) -> Option<&'a Reply> {
    b.windows.iter().find_map(|w| {
        w.requests
            .iter()
            .filter(|r| !r.record.warmup && r.record.prompt == prompt)
            .find(|r| request_failure(r).is_none())
            .map(|r| &r.reply)
    })
}

/// The verdict of `[assert.drift]` on `ev` against `baselines` (as `servegate::loaded::load_baseline`
/// gives them; empty: they were not loaded, which fails): the first baseline that applies
/// ([`choose_baseline`]), each prompt's worst reply against it ([`compare_prompts`]), the line
/// ([`describe_rows`]).
pub(super) fn judge_drift(gate: &GateSpec, ev: &Evidence, baselines: &[BaselineSlot]) -> Verdict {
    let kind = AssertionKind::Drift;
    let d = gate.assertions.drift.as_ref().expect("drift declared");
    if baselines.is_empty() {
        return Verdict::new(
            kind,
            Outcome::Fail,
            "no baseline was loaded to compare with (judged without its baselines)",
        );
    }
    let run_key = drift::answers_key(gate, ev);
    let chosen = match choose_baseline(d, ev, baselines, &run_key) {
        Ok(c) => c,
        Err(v) => return *v,
    };
    let base = chosen.base;
    let errors = chosen.errors;
    let release = comparability::release_changes(&baseline_key(base), &run_key);
    let (rows, pooled, replies) = compare_prompts(gate, ev, base);
    let n = rows.len();
    let (failing, _verb, mut parts) = describe_rows(d, &rows, &pooled, &chosen.allowed);
    parts.push(format!(
        "baseline {} ({} window{})",
        base.baseline.dir.display(),
        base.windows.len(),
        if base.windows.len() == 1 { "" } else { "s" }
    ));
    if !errors.is_empty() {
        parts.push(format!(
            "unreadable baselines skipped: {}",
            errors
                .iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    parts.push(format!("n={n} prompts ({replies} replies)"));
    let outcome = if failing.len() as u64 <= d.max_diverged as u64 {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    if let Some(changed) = comparability::describe_release(&release) {
        parts.push(if outcome == Outcome::Fail {
            format!("likely cause: {changed}")
        } else {
            changed
        });
    }
    Verdict::new(kind, outcome, parts.join("; "))
}

/// The baseline `[assert.drift]` compares with: the first loaded one whose comparability key differs from the
/// run's only where the gate allows (`may_differ`), with those allowed differences and the baselines that
/// could not be read; or the failing (none readable) or incomparable verdict.
struct Chosen<'b> {
    base: &'b crate::analysis::LoadedBaseline,
    allowed: Vec<comparability::KeyDiff>,
    errors: Vec<&'b String>,
}

fn choose_baseline<'b>(
    d: &crate::spec::drift::DriftAssert,
    ev: &Evidence,
    baselines: &'b [BaselineSlot],
    run_key: &ComparabilityKey,
) -> Result<Chosen<'b>, Box<Verdict>> {
    let kind = AssertionKind::Drift;
    let errors: Vec<&String> = baselines.iter().filter_map(|b| b.as_ref().err()).collect();
    let loaded: Vec<&crate::analysis::LoadedBaseline> =
        baselines.iter().filter_map(|b| b.as_ref().ok()).collect();
    if loaded.is_empty() {
        return Err(Box::new(Verdict::new(
            kind,
            Outcome::Fail,
            format!(
                "no baseline could be read: {}",
                errors
                    .iter()
                    .map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )));
    }
    let mut why = Vec::new();
    let mut allowed = Vec::new();
    let chosen = loaded.iter().find(|b| {
        let (ok, diffs): (Vec<_>, Vec<_>) =
            comparability::differences(&baseline_key(b), run_key, KeyUse::Answers)
                .into_iter()
                .partition(|diff| d.may_differ.contains(&diff.field));
        if diffs.is_empty() {
            allowed = ok;
            true
        } else {
            why.push(format!(
                "{}: {}",
                b.baseline.dir.display(),
                comparability::describe(&diffs)
            ));
            false
        }
    });
    let Some(base) = chosen else {
        return Err(Box::new(Verdict::new(
            kind,
            Outcome::Incomparable,
            format!(
                "{}; the baseline no longer applies to what the gate fixes, so nothing was compared: renew it \
                 with `servegate bless {} --baseline {}` (or on_incomparable = \"skip\")",
                why.join(" | "),
                ev.run.gate_file,
                ev.dir.display()
            ),
        )));
    };
    Ok(Chosen {
        base,
        allowed,
        errors,
    })
}

/// Per prompt of the gate: the worst comparison of this run's replies to it with the baseline's
/// (a failed reply is worst), or why it could not be compared; the figures pooled over every comparison; the
/// replies compared.
fn compare_prompts(
    gate: &GateSpec,
    ev: &Evidence,
    base: &crate::analysis::LoadedBaseline,
) -> (Vec<Result<Comparison, String>>, Figures, usize) {
    let d = gate.assertions.drift.as_ref().expect("drift declared");
    let rule = d.rule;
    let k = d.top_k as usize;
    let prompts = &gate.request.prompts;
    let judged: Vec<_> = ev.requests.iter().filter(|r| !r.record.warmup).collect();
    // Per prompt: the worst comparison over this run's replies to it, or why it could not be compared.
    let mut rows: Vec<Result<Comparison, String>> = Vec::new();
    let mut pooled = Figures::default();
    let mut replies = 0;
    for p in prompts {
        let Some(b) = baseline_reply(base, p) else {
            rows.push(Err("the baseline holds no good reply to it".into()));
            continue;
        };
        let mine: Vec<_> = judged.iter().filter(|r| r.record.prompt == *p).collect();
        if mine.is_empty() {
            rows.push(Err("this run holds no reply to it".into()));
            continue;
        }
        let mut worst: Option<Result<Comparison, String>> = None;
        for r in mine {
            replies += 1;
            let this = match request_failure(r) {
                Some(f) => Err(format!("this run's reply failed: {f}")),
                None => {
                    let c = drift::compare(b, &r.reply, rule, k);
                    pooled.add(&c.figures);
                    Ok(c)
                }
            };
            let rank = |x: &Result<Comparison, String>| match x {
                Err(_) => 4,
                Ok(c) if !c.passes() => 3,
                Ok(c) => c.state as u8,
            };
            if worst.as_ref().is_none_or(|w| rank(&this) > rank(w)) {
                worst = Some(this);
            }
        }
        rows.push(worst.expect("one reply at least"));
    }

    (rows, pooled, replies)
}

/// The drift line's parts from the per-prompt rows: the prompts that failed, the identical and close ones,
/// each prompt's state, the rule, the allowed differences, the logprob fallback and the pooled figures; with
/// the failing prompts and the verb (`differ` or `diverged`).
fn describe_rows(
    d: &crate::spec::drift::DriftAssert,
    rows: &[Result<Comparison, String>],
    pooled: &Figures,
    allowed: &[comparability::KeyDiff],
) -> (Vec<usize>, &'static str, Vec<String>) {
    let rule = d.rule;
    let k = d.top_k as usize;
    let n = rows.len();
    let failing: Vec<usize> = (0..n)
        .filter(|&i| !matches!(&rows[i], Ok(c) if c.passes()))
        .collect();
    let count = |s: State| {
        rows.iter()
            .filter(|r| matches!(r, Ok(c) if c.state == s && c.passes()))
            .count()
    };
    let fell_back: Vec<String> = rows
        .iter()
        .filter_map(|r| r.as_ref().ok().and_then(|c| c.fallback.clone()))
        .collect();
    let verb = if rule == Rule::Exact || !fell_back.is_empty() {
        "differ"
    } else {
        "diverged"
    };
    let show = |i: usize| -> String {
        match &rows[i] {
            Ok(c) => format!("prompt {} {}", i + 1, c.describe("baseline", "this run")),
            Err(e) => format!("prompt {}: {e}", i + 1),
        }
    };
    let mut parts = vec![format!(
        "{} of {n} prompts {verb}{}",
        failing.len(),
        if failing.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                failing
                    .iter()
                    .map(|&i| show(i))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    )];
    parts.push(format!("{} identical", count(State::Identical)));
    let per_prompt: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(c) => match c.position {
                Some(at) if c.fallback.is_none() => {
                    format!("{} {} at token {at}", i + 1, c.state.word())
                }
                Some(at) => format!("{} differs at character {at}", i + 1),
                None => format!("{} {}", i + 1, c.state.word()),
            },
            Err(_) => format!("{} not compared", i + 1),
        })
        .collect();
    let close: Vec<usize> = (0..n)
        .filter(|&i| matches!(&rows[i], Ok(c) if c.state == State::Close && c.passes()))
        .collect();
    if !close.is_empty() {
        parts.push(format!(
            "{} close ({})",
            close.len(),
            close
                .iter()
                .map(|&i| show(i))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    parts.push(format!("per prompt: {}", per_prompt.join(", ")));
    parts.push(format!("rule {}, top {k}", rule.name()));
    if !allowed.is_empty() {
        parts.push(format!(
            "differs from the baseline as the gate allows (may_differ): {}",
            allowed
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !fell_back.is_empty() {
        parts.push(format!(
            "logprobs missing ({}): fell back to rule exact on the text",
            fell_back[0]
        ));
    }
    if pooled.positions > 0 {
        let f3 = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or("-".into());
        let f4 = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or("-".into());
        parts.push(format!(
            "common prefix: top-1 agreement {:.1}% ({} of {} positions), |Δ logprob| mean {} max {} nats, KL (top-{k} lower bound) mean {} max {} nats",
            100.0 * pooled.top1_agree as f64 / pooled.positions as f64,
            pooled.top1_agree,
            pooled.positions,
            f3(pooled.mean_abs_dlogprob()),
            f3(pooled.max_abs_dlogprob()),
            f4(pooled.mean_kl()),
            f4(pooled.max_kl()),
        ));
    }
    if d.max_diverged > 0 {
        parts.push(format!("at most {} may {verb}", d.max_diverged));
    }
    (failing, verb, parts)
}

/// A pair gate's `same_answers` under `rule = "logprobs_close"`: every reply to `prompt` (each labelled with its
/// arm) compared with the first one by [`drift::compare`]; a reply that fails the rule is a problem, a close
/// one a note (both say at which token and how far the replies parted). The load issue's consistency check
/// (replies under concurrency against concurrency 1, `judge::load`) calls [`drift::compare`] the same way.
pub(super) fn same_answers_close(
    prompt: &str,
    replies: &[(String, &Reply)],
    k: usize,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let Some((first_label, first)) = replies.first() else {
        return;
    };
    let short: String = prompt.chars().take(40).collect();
    for (label, r) in &replies[1..] {
        let c = drift::compare(first, r, Rule::LogprobsClose, k);
        let line = format!(
            "{label} against {first_label} on {short:?}: {} {}{}",
            c.state.word(),
            c.describe(first_label, label),
            c.fallback
                .as_ref()
                .map(|f| format!(" (logprobs missing: {f}; rule exact on the text)"))
                .unwrap_or_default()
        );
        // The same finding on every repeat is said once.
        if !c.passes() {
            if !problems.contains(&line) {
                problems.push(line);
            }
        } else if c.state == State::Close && !notes.contains(&line) {
            notes.push(line);
        }
    }
}
