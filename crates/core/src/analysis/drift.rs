//! Answer drift: how far two greedy replies to the same prompt parted, judged with the serve's own logprobs.
//! Pure: two [`Reply`]s in, one [`Comparison`] out. Used by `[assert.drift]` (this run against a blessed
//! baseline), by a pair gate's `same_answers` with `rule = "logprobs_close"` (ours against theirs), and by
//! a load gate's `[assert.consistency]` (a reply under concurrency against concurrency 1): [`compare`] is the one
//! function (docs/drift.md).
//!
//! States of one comparison ([`State`]):
//! * **identical**: the same tokens (by id where both sides give ids, else by text), the same length;
//! * **close**: the first differing token at position i, where each side's token is among the other's top-k
//!   logprobs at i: float noise between near-tied tokens. This is vLLM's `check_logprobs_close`
//!   (vllm-project/vllm `tests/models/utils.py`): greedy tokens must agree until the first divergence; there each
//!   side's token must be in the other's top-k logprobs, and the comparison of that sequence stops, since the
//!   contexts differ from there on;
//! * **diverged**: the first differing token is outside the other's top-k (either way), or one side has no
//!   top-k at i, or one reply ends where the other goes on (the ending side's end-of-sequence token has no
//!   logprob entry in a stream, so nothing shows it was a near-tie).
//!
//! Rules ([`Rule`]): `exact` passes only identical replies; `logprobs_close` passes identical and close. When
//! either side carries no logprobs, the comparison falls back to `exact` on the text and says so
//! ([`Comparison::fallback`]).
//!
//! Figures over the positions where both sides saw the same context (the common prefix plus the first differing
//! position, [`Figures`]): top-1 agreement, mean and max |Δ logprob| of the chosen tokens (common prefix only),
//! and a KL divergence estimated from the top-k ([`kl_top_k`]; a lower bound, see there).

use serde::Serialize;

use crate::analysis::logprobs::{TokenLogprob, TopLogprob};
use crate::analysis::reply::Reply;

pub use crate::spec::drift::Rule;

/// What one comparison found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Same tokens, same length.
    Identical,
    /// Parted at a near-tie: each side's token among the other's top-k.
    Close,
    /// Parted otherwise.
    Diverged,
}

impl State {
    /// `identical`, `close`, `diverged`.
    pub fn word(self) -> &'static str {
        match self {
            State::Identical => "identical",
            State::Close => "close",
            State::Diverged => "diverged",
        }
    }
}

/// One side's token at the first divergence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideToken {
    /// Token text (`None`: this side ended here).
    pub token: Option<String>,
    /// Its logprob, nats, when given.
    pub logprob: Option<f64>,
    /// True when the **other** side's token is among this side's top-k at this position (`None`: no top-k to
    /// look in, or no token).
    pub has_other: Option<bool>,
    /// The text around the position: up to 32 characters before, the token in `[...]`, up to 32 after.
    pub around: String,
}

/// Figures over the positions both sides decoded from the same context.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Positions compared (common prefix plus the first differing position, if any, within both lengths).
    pub positions: usize,
    /// Positions whose top-1 token (the greedy choice) agreed.
    pub top1_agree: usize,
    /// |Δ logprob| of the chosen token at each common-prefix position where both give one, nats.
    pub abs_dlogprob: Vec<f64>,
    /// KL(baseline ‖ run) estimated from the top-k at each compared position where both give a top-k
    /// ([`kl_top_k`]), nats.
    pub kl: Vec<f64>,
}

impl Figures {
    /// Mean of `abs_dlogprob` (None when empty).
    pub fn mean_abs_dlogprob(&self) -> Option<f64> {
        mean(&self.abs_dlogprob)
    }
    /// Max of `abs_dlogprob`.
    pub fn max_abs_dlogprob(&self) -> Option<f64> {
        self.abs_dlogprob.iter().copied().reduce(f64::max)
    }
    /// Mean of `kl`.
    pub fn mean_kl(&self) -> Option<f64> {
        mean(&self.kl)
    }
    /// Max of `kl`.
    pub fn max_kl(&self) -> Option<f64> {
        self.kl.iter().copied().reduce(f64::max)
    }
    /// Adds another comparison's figures (pooling positions over prompts).
    pub fn add(&mut self, o: &Figures) {
        self.positions += o.positions;
        self.top1_agree += o.top1_agree;
        self.abs_dlogprob.extend_from_slice(&o.abs_dlogprob);
        self.kl.extend_from_slice(&o.kl);
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The comparison of a baseline reply with a run's reply to the same prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// What was found (with logprobs: identical, close or diverged; without: identical or diverged).
    pub state: State,
    /// The rule that decides whether it passes: the one asked for, or `exact` when logprobs were missing.
    pub rule: Rule,
    /// Why the rule fell back to `exact` (`this run's reply carries no logprobs`), if it did.
    pub fallback: Option<String>,
    /// The first differing position: a token index (0-based) with logprobs, a character index without.
    pub position: Option<usize>,
    /// The baseline's side at `position`.
    pub baseline: Option<SideToken>,
    /// This run's side at `position`.
    pub run: Option<SideToken>,
    /// k used for the top-k lookups.
    pub top_k: usize,
    /// Figures over the common context.
    pub figures: Figures,
}

impl Comparison {
    /// True when `rule` accepts `state` (exact: identical; logprobs_close: identical or close).
    pub fn passes(&self) -> bool {
        match self.rule {
            Rule::Exact => self.state == State::Identical,
            Rule::LogprobsClose => self.state != State::Diverged,
        }
    }

    /// One phrase for a verdict: `at token 7: baseline " Paris" -0.02, this run " Lyon" -0.90, " Paris" not in
    /// top 5` (names the sides `a` and `b`: "baseline"/"this run", or "ours"/"theirs").
    pub fn describe(&self, a: &str, b: &str) -> String {
        let Some(pos) = self.position else {
            return "identical".into();
        };
        let unit = if self.fallback.is_some() {
            "character"
        } else {
            "token"
        };
        let side = |name: &str, s: &Option<SideToken>| match s {
            Some(SideToken {
                token: Some(t),
                logprob,
                ..
            }) => match logprob {
                Some(l) => format!("{name} {} {l:.2}", crate::analysis::reply::quoted(t, 24)),
                None => format!("{name} {}", crate::analysis::reply::quoted(t, 24)),
            },
            _ => format!("{name} ends"),
        };
        let mut out = format!(
            "at {unit} {pos}: {}, {}",
            side(a, &self.baseline),
            side(b, &self.run)
        );
        let k = self.top_k;
        let tok = |s: &Option<SideToken>| {
            s.as_ref()
                .and_then(|s| s.token.clone())
                .map(|t| crate::analysis::reply::quoted(&t, 24))
        };
        if self.fallback.is_none() {
            if let (Some(bs), Some(rs)) = (&self.baseline, &self.run) {
                // `has_other` of the baseline side: is the run's token in the baseline's top-k?
                if let (Some(false), Some(t)) = (bs.has_other, tok(&self.run)) {
                    out.push_str(&format!(", {t} not in {a}'s top {k}"));
                }
                if let (Some(false), Some(t)) = (rs.has_other, tok(&self.baseline)) {
                    out.push_str(&format!(", {t} not in {b}'s top {k}"));
                }
                if bs.has_other == Some(true) && rs.has_other == Some(true) {
                    out.push_str(&format!(", each in the other's top {k}"));
                }
                if bs.token.is_some()
                    && rs.token.is_some()
                    && (bs.has_other.is_none() || rs.has_other.is_none())
                {
                    out.push_str(", no top-k logprobs to look in");
                }
            }
        }
        let around =
            |s: &Option<SideToken>| s.as_ref().map(|s| s.around.clone()).unwrap_or_default();
        out.push_str(&format!(
            " ({a}: {}; {b}: {})",
            crate::analysis::reply::quoted(&around(&self.baseline), 80),
            crate::analysis::reply::quoted(&around(&self.run), 80)
        ));
        out
    }
}

/// Same token: by id when both sides give one, else by text.
fn same(a_id: Option<i64>, a_tok: &str, b_id: Option<i64>, b_tok: &str) -> bool {
    match (a_id, b_id) {
        (Some(x), Some(y)) => x == y,
        _ => a_tok == b_tok,
    }
}

/// The first `k` alternatives by logprob, most likely first.
fn top_k(top: &[TopLogprob], k: usize) -> Vec<&TopLogprob> {
    let mut v: Vec<&TopLogprob> = top.iter().collect();
    v.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
    v.truncate(k);
    v
}

/// KL(P ‖ Q) of a baseline position P against a run position Q, estimated from their top-k lists: the KL of
/// both distributions coarse-grained onto the partition {each token in both lists} ∪ {every other token}
/// (whose mass is 1 minus the listed mass on each side). By the log-sum inequality a coarse-graining never
/// raises a KL divergence, so this is a **lower bound** of the true KL: the truncated tail biases it low, more
/// so the smaller k and the flatter the distributions. (llama.cpp's `llama-perplexity --kl-divergence` computes
/// the full-vocabulary KL from stored base logits, whose own stated bias is the 16-bit storage of the base
/// log-probabilities; a serve gives us only its top-k.) Nats, ≥ 0; `None` when either list is empty.
pub fn kl_top_k(p: &[TopLogprob], q: &[TopLogprob], k: usize) -> Option<f64> {
    let (p, q) = (top_k(p, k), top_k(q, k));
    if p.is_empty() || q.is_empty() {
        return None;
    }
    let mut kl = 0.0;
    let (mut ps, mut qs) = (0.0, 0.0);
    for a in &p {
        if let Some(b) = q.iter().find(|b| same(a.id, &a.token, b.id, &b.token)) {
            let (pa, qb) = (a.logprob.exp(), b.logprob.exp());
            kl += pa * (a.logprob - b.logprob);
            ps += pa;
            qs += qb;
        }
    }
    let (pt, qt) = ((1.0 - ps).max(0.0), (1.0 - qs).max(1e-12));
    if pt > 1e-12 {
        kl += pt * (pt / qt).ln();
    }
    Some(kl.max(0.0))
}

/// `…of France is[ Paris] and…`: up to 32 characters of text before `i`, token `i` in brackets, up to 32 after.
fn around(tokens: &[TokenLogprob], i: usize) -> String {
    let before: String = tokens[..i.min(tokens.len())]
        .iter()
        .map(|t| t.token.as_str())
        .collect();
    let before: String = {
        let n = before.chars().count();
        before.chars().skip(n.saturating_sub(32)).collect()
    };
    let tok = tokens.get(i).map(|t| t.token.as_str()).unwrap_or("");
    let after: String = tokens
        .iter()
        .skip(i + 1)
        .map(|t| t.token.as_str())
        .collect::<String>()
        .chars()
        .take(32)
        .collect();
    format!("…{before}[{tok}]{after}…")
}

fn around_text(text: &str, i: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let b: String = chars[i.saturating_sub(32)..i.min(chars.len())]
        .iter()
        .collect();
    let c: String = chars.get(i).map(|c| c.to_string()).unwrap_or_default();
    let a: String = chars.iter().skip(i + 1).take(32).collect();
    format!("…{b}[{c}]{a}…")
}

/// Compares `baseline` with `run` (two greedy replies to one prompt) under `rule`, with `k` alternatives per
/// position (see the module doc). Uses choice 0's `logprobs.content` when **both** replies carry them;
/// otherwise falls back to `exact` on the content text, stating which side lacked them.
pub fn compare(baseline: &Reply, run: &Reply, rule: Rule, k: usize) -> Comparison {
    let fallback = match (baseline.logprobs.is_empty(), run.logprobs.is_empty()) {
        (false, false) => None,
        (true, true) => Some("neither reply carries logprobs".to_string()),
        (true, false) => Some("the baseline's reply carries no logprobs".to_string()),
        (false, true) => Some("this run's reply carries no logprobs".to_string()),
    };
    if let Some(why) = fallback {
        return compare_text(&baseline.content, &run.content, why, k);
    }
    compare_tokens(&baseline.logprobs, &run.logprobs, rule, k)
}

/// [`compare`] on two token sequences with their logprobs.
pub fn compare_tokens(a: &[TokenLogprob], b: &[TokenLogprob], rule: Rule, k: usize) -> Comparison {
    let mut fig = Figures::default();
    let n = a.len().min(b.len());
    let mut first = None;
    for i in 0..n {
        let (x, y) = (&a[i], &b[i]);
        fig.positions += 1;
        if let Some(kl) = kl_top_k(&x.top, &y.top, k) {
            fig.kl.push(kl);
        }
        if same(x.id, &x.token, y.id, &y.token) {
            fig.top1_agree += 1;
            fig.abs_dlogprob.push((x.logprob - y.logprob).abs());
        } else {
            first = Some(i);
            break;
        }
    }
    let side = |s: &[TokenLogprob], other: &[TokenLogprob], i: usize| -> SideToken {
        let t = s.get(i);
        let o = other.get(i);
        SideToken {
            token: t.map(|t| t.token.clone()),
            logprob: t.map(|t| t.logprob),
            has_other: match (t, o) {
                (Some(t), Some(o)) if !t.top.is_empty() => Some(
                    top_k(&t.top, k)
                        .iter()
                        .any(|c| same(c.id, &c.token, o.id, &o.token)),
                ),
                _ => None,
            },
            around: around(s, i),
        }
    };
    let position = first.or((a.len() != b.len()).then_some(n));
    let Some(pos) = position else {
        return Comparison {
            state: State::Identical,
            rule,
            fallback: None,
            position: None,
            baseline: None,
            run: None,
            top_k: k,
            figures: fig,
        };
    };
    let (bs, rs) = (side(a, b, pos), side(b, a, pos));
    let close = bs.has_other == Some(true) && rs.has_other == Some(true);
    Comparison {
        state: if close { State::Close } else { State::Diverged },
        rule,
        fallback: None,
        position: Some(pos),
        baseline: Some(bs),
        run: Some(rs),
        top_k: k,
        figures: fig,
    }
}

fn compare_text(a: &str, b: &str, why: String, k: usize) -> Comparison {
    let pos = a
        .chars()
        .zip(b.chars())
        .position(|(x, y)| x != y)
        .or_else(|| {
            (a.chars().count() != b.chars().count())
                .then(|| a.chars().count().min(b.chars().count()))
        });
    let side = |s: &str, i: usize| SideToken {
        token: s.chars().nth(i).map(|c| c.to_string()),
        logprob: None,
        has_other: None,
        around: around_text(s, i),
    };
    Comparison {
        state: if pos.is_some() {
            State::Diverged
        } else {
            State::Identical
        },
        rule: Rule::Exact,
        fallback: Some(why),
        position: pos,
        baseline: pos.map(|p| side(a, p)),
        run: pos.map(|p| side(b, p)),
        top_k: k,
        figures: Figures::default(),
    }
}

/// The comparability key of a run for answers: [`crate::evidence::comparability::key_of`] plus the numerics settings of its
/// serve log ([`numerics_of_log`]) in `extra`.
pub fn answers_key(
    gate: &crate::spec::GateSpec,
    ev: &crate::analysis::Evidence,
) -> crate::evidence::comparability::ComparabilityKey {
    crate::evidence::comparability::key_of_evidence(gate, &ev.run, ev.serve_log.as_deref())
}

/// The serve settings that change greedy numerics, read from its log: the one reader,
/// [`crate::evidence::comparability::numerics_of_log`].
pub use crate::evidence::comparability::numerics_of_log;

#[cfg(test)]
mod tests {
    use super::*;

    /// A token with id, logprob and its top list (id, logprob) — the chosen token first.
    fn t(id: i64, text: &str, lp: f64, top: &[(i64, &str, f64)]) -> TokenLogprob {
        TokenLogprob {
            id: Some(id),
            token: text.into(),
            bytes: None,
            logprob: lp,
            top: top
                .iter()
                .map(|&(id, tok, logprob)| TopLogprob {
                    id: Some(id),
                    token: tok.into(),
                    logprob,
                })
                .collect(),
        }
    }

    fn seq(paris_second: bool) -> Vec<TokenLogprob> {
        let mut v = vec![
            t(1, "The", -0.6, &[(1, "The", -0.6), (2, "Paris", -2.2)]),
            t(
                3,
                " capital",
                -0.01,
                &[(3, " capital", -0.01), (4, " Capital", -5.2)],
            ),
        ];
        v.push(if paris_second {
            t(6, " Lyon", -0.9, &[(6, " Lyon", -0.9), (5, " Paris", -1.0)])
        } else {
            t(
                5,
                " Paris",
                -0.02,
                &[(5, " Paris", -0.02), (6, " Lyon", -4.0)],
            )
        });
        v
    }

    #[test]
    fn numerics_settings_are_read_from_a_real_llama_cpp_log() {
        // Lines of llama.cpp b11434's startup log (server_log_lv4_startup.txt of the founding material's
        // llama-server captures, data/README.md; not copied into tests/data, the lines are quoted here).
        let log = "0.00.577.889 I llama_context: flash_attn            = auto\n\
                   0.00.577.890 I llama_context: kv_unified            = false\n\
                   0.00.649.377 I llama_kv_cache: size =   45.00 MiB (  2048 cells,  30 layers,  1/1 seqs), K (f16):   22.50 MiB, V (f16):   22.50 MiB\n\
                   0.00.652.033 I resolve_fused_ops: Flash Attention enabled\n\
                   0.00.758.302 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 2048, kv_unified = 'false'\n";
        let n = numerics_of_log(log);
        assert_eq!(
            n.get("flash_attention").map(String::as_str),
            Some("enabled")
        );
        assert_eq!(n.get("kv_unified").map(String::as_str), Some("false"));
        assert_eq!(n.get("cache_type_k").map(String::as_str), Some("f16"));
        assert_eq!(n.get("cache_type_v").map(String::as_str), Some("f16"));
        assert_eq!(n.len(), 4);
        assert!(numerics_of_log("nothing here").is_empty());
    }

    #[test]
    fn identical_sequences_are_identical_with_zero_figures() {
        let c = compare_tokens(&seq(false), &seq(false), Rule::LogprobsClose, 5);
        assert_eq!(c.state, State::Identical);
        assert!(c.passes());
        assert_eq!((c.figures.positions, c.figures.top1_agree), (3, 3));
        assert_eq!(c.figures.max_abs_dlogprob(), Some(0.0));
        assert!(c.figures.max_kl().unwrap() < 1e-12);
    }

    #[test]
    fn a_swap_inside_both_top_k_is_close_and_exact_fails_it() {
        let c = compare_tokens(&seq(false), &seq(true), Rule::LogprobsClose, 5);
        assert_eq!(c.state, State::Close);
        assert_eq!(c.position, Some(2));
        assert!(c.passes());
        let d = c.describe("baseline", "this run");
        assert!(d.starts_with("at token 2: baseline \" Paris\" -0.02, this run \" Lyon\" -0.90, each in the other's top 5"), "{d}");
        let e = compare_tokens(&seq(false), &seq(true), Rule::Exact, 5);
        assert_eq!(e.state, State::Close);
        assert!(!e.passes());
    }

    #[test]
    fn a_token_outside_the_top_k_is_diverged_and_named() {
        let mut run = seq(false);
        run[2] = t(9, " Rome", -3.0, &[(9, " Rome", -3.0), (5, " Paris", -3.1)]);
        let c = compare_tokens(&seq(false), &run, Rule::LogprobsClose, 5);
        assert_eq!(c.state, State::Diverged);
        assert!(!c.passes());
        let d = c.describe("baseline", "this run");
        assert!(d.contains("\" Rome\" not in baseline's top 5"), "{d}");
        // k = 1: even the near-tie is outside.
        let c1 = compare_tokens(&seq(false), &seq(true), Rule::LogprobsClose, 1);
        assert_eq!(c1.state, State::Diverged);
    }

    #[test]
    fn one_side_ending_early_is_diverged() {
        let mut short = seq(false);
        short.pop();
        let c = compare_tokens(&seq(false), &short, Rule::LogprobsClose, 5);
        assert_eq!((c.state, c.position), (State::Diverged, Some(2)));
        assert!(c.describe("baseline", "this run").contains("this run ends"));
    }

    #[test]
    fn the_kl_estimate_is_zero_for_equal_lists_and_grows_with_the_shift() {
        let p = [
            TopLogprob {
                id: Some(1),
                token: "a".into(),
                logprob: (0.7f64).ln(),
            },
            TopLogprob {
                id: Some(2),
                token: "b".into(),
                logprob: (0.2f64).ln(),
            },
        ];
        assert!(kl_top_k(&p, &p, 5).unwrap().abs() < 1e-12);
        let q = [
            TopLogprob {
                id: Some(1),
                token: "a".into(),
                logprob: (0.5f64).ln(),
            },
            TopLogprob {
                id: Some(2),
                token: "b".into(),
                logprob: (0.4f64).ln(),
            },
        ];
        // Three cells: a, b, tail (0.1 vs 0.1).
        let want =
            0.7 * (0.7f64 / 0.5).ln() + 0.2 * (0.2f64 / 0.4).ln() + 0.1 * (0.1f64 / 0.1).ln();
        assert!((kl_top_k(&p, &q, 5).unwrap() - want).abs() < 1e-12);
        assert_eq!(kl_top_k(&p, &[], 5), None);
    }

    #[test]
    fn without_logprobs_the_text_is_compared_exactly_and_it_says_so() {
        let a = Reply {
            content: "The capital is Paris.".into(),
            ..Default::default()
        };
        let mut b = a.clone();
        let c = compare(&a, &b, Rule::LogprobsClose, 5);
        assert_eq!((c.state, c.rule), (State::Identical, Rule::Exact));
        assert_eq!(
            c.fallback.as_deref(),
            Some("neither reply carries logprobs")
        );
        b.content = "The capital is Lyon.".into();
        let c = compare(&a, &b, Rule::LogprobsClose, 5);
        assert_eq!((c.state, c.position), (State::Diverged, Some(15)));
        assert!(c
            .describe("baseline", "this run")
            .starts_with("at character 15: baseline \"P\", this run \"L\""));
    }
}
