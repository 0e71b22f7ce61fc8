//! The first user's A-B-B-A pair ticket (FastFlowLM vs the 1bit serve, `tests/data/seed-runs.md` "The A-B-B-A
//! pair") judged by `gates/npu-pair-flm.toml` on the evidence reconstructed from it
//! (`tests/data/runs/make_flm_pair.py`): the verdict lines and the pair records re-derive every published
//! figure, and the same ticket with ours on the slow per-op route fails the ratio.

use std::path::PathBuf;

use crate::fixtures::root;
use servegate::judge::{judge_pair, Outcome, Verdict};
use servegate::spec::GateSpec;
use servegate::vocab::AssertionKind;

fn run(name: &str) -> PathBuf {
    root().join("tests/data/runs").join(name)
}

fn gate() -> GateSpec {
    servegate::spec::load(&root().join("gates/npu-pair-flm.toml")).unwrap()
}

fn verdicts(name: &str) -> Vec<Verdict> {
    let pe = servegate::loaded::load_pair(&run(name)).unwrap();
    judge_pair(&gate(), &pe)
}

fn of(v: &[Verdict], kind: AssertionKind) -> &Verdict {
    v.iter().find(|v| v.kind == kind).unwrap()
}

/// The evidence carries the gate it was made for: regenerate it (make_flm_pair.py) when the gate changes.
#[test]
fn the_reconstructed_ticket_carries_the_committed_gate() {
    let gate = std::fs::read_to_string(root().join("gates/npu-pair-flm.toml")).unwrap();
    for name in ["flm-pair-pass", "flm-pair-slowroute"] {
        let copy = std::fs::read_to_string(run(name).join("gate.toml")).unwrap();
        assert_eq!(
            copy, gate,
            "{name}/gate.toml is stale: run tests/data/runs/make_flm_pair.py"
        );
    }
}

/// The published ticket passes, and its line states both medians over six repeats each (not the arm
/// medians), their ranges, the ratio 1.16, the order, and each arm's median and spread as published.
#[test]
fn the_published_ticket_passes_with_its_figures_re_derived() {
    let v = verdicts("flm-pair-pass");
    assert!(v.iter().all(|v| v.outcome == Outcome::Pass), "{v:#?}");
    let r = of(&v, AssertionKind::Ratio);
    let d = r.details();
    for want in [
        "decode: theirs 45.57 tok/s (45.08-45.93, n=6) / ours 39.25 tok/s (39.20-39.32, n=6) = 1.16x",
        "order theirs, ours, ours, theirs (bounds 0.5-1.5x)",
        "arms: 1 theirs 45.43 tok/s (spread 1.012, n=3); 2 ours 39.28 tok/s (spread 1.001, n=3); \
         3 ours 39.23 tok/s (spread 1.003, n=3); 4 theirs 45.91 tok/s (spread 1.009, n=3)",
        "n=12 of 12 planned",
    ] {
        assert!(d.contains(want), "missing {want:?} in {d}");
    }
    let ratio = r.median.unwrap();
    assert!((ratio - 45.57 / 39.251).abs() < 1e-3, "{ratio}");
    assert_eq!(format!("{ratio:.2}"), "1.16");
}

/// First token: `[assert.first_token_ratio]` over the same evidence gives theirs 0.591 s / ours 0.568 s,
/// level (1.04x), and shows the slower first request of each of their arms (0.658 and 0.653 s) apart.
#[test]
fn the_published_first_token_figures_re_derive() {
    let v = verdicts("flm-pair-pass");
    let r = of(&v, AssertionKind::FirstTokenRatio);
    let d = r.details();
    assert_eq!(r.outcome, Outcome::Pass, "{d}");
    for want in [
        "first token: theirs 0.591 s (0.589-0.658, n=6) / ours 0.568 s (0.566-0.578, n=6) = 1.04x",
        "(bounds 0.8-1.25x)",
        "1 theirs 0.591 s (spread 1.117, n=3, first request 0.658 s shown apart); 2 ours 0.567 s",
        "3 ours 0.573 s",
        "4 theirs 0.591 s (spread 1.107, n=3, first request 0.653 s shown apart)",
    ] {
        assert!(d.contains(want), "missing {want:?} in {d}");
    }
    assert!(
        r.message.starts_with("first_token_ratio PASS "),
        "{}",
        r.message
    );
}

/// Ours on the per-op forward answers as well (content and the known answer pass) but decodes at about
/// 2 tok/s and answers late: the decode ratio (about 23x) and the first-token ratio (about 0.55x) are far
/// outside their bounds and fail, naming both figures.
#[test]
fn ours_on_the_slow_route_fails_the_ratio() {
    let v = verdicts("flm-pair-slowroute");
    assert_eq!(of(&v, AssertionKind::Content).outcome, Outcome::Pass);
    assert_eq!(of(&v, AssertionKind::KnownAnswer).outcome, Outcome::Pass);
    let ft = of(&v, AssertionKind::FirstTokenRatio);
    assert_eq!(ft.outcome, Outcome::Fail, "{}", ft.details());
    assert!(
        ft.details()
            .contains("ours 1.069 s (1.040-1.101, n=6) = 0.55x"),
        "{}",
        ft.details()
    );
    let r = of(&v, AssertionKind::Ratio);
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.details());
    assert!(
        r.details().contains(
            "theirs 45.57 tok/s (45.08-45.93, n=6) / ours 1.95 tok/s (1.90-2.10, n=6) = 23.37x"
        ),
        "{}",
        r.details()
    );
}

/// The records `servegate run --record ID` writes from the gate's `[record]` table: ours' decode and
/// first-token records, each with theirs' figure, the ratio, the arm order and every arm's median, the
/// model hash from pair.json, and the gate's "what would make it wrong" sentence; theirs' records the same
/// from its side.
#[test]
fn the_pair_records_carry_both_runtimes_every_arm_and_the_caveat() {
    let g = gate();
    let pe = servegate::loaded::load_pair(&run("flm-pair-pass")).unwrap();
    let rec = |metric: &str, role: &str| {
        let spec = g
            .record_spec(&format!("flm-ticket-{role}-{metric}"), metric)
            .unwrap();
        servegate::records::record::from_pair_run_as(&g, &pe, &spec, role).unwrap()
    };
    let decode = rec("decode_rate", "ours");
    let p = decode.pair.as_ref().unwrap();
    assert_eq!(
        (decode.value, decode.n, p.other_value, p.other_n),
        (39.25, 6, 45.57, 6)
    );
    assert_eq!(p.ratio, 1.161);
    assert_eq!(p.arm_order, ["other", "this", "this", "other"]);
    assert_eq!(
        p.arm_medians.as_deref(),
        Some(&[45.43, 39.28, 39.23, 45.91][..])
    );
    assert_eq!(decode.values.as_ref().unwrap().len(), 6);
    assert_eq!(p.other_engine, "FastFlowLM flm serve (qwen3:1.7b)");
    assert_eq!(decode.settings.engine, "1bit serve");
    assert_eq!(
        decode.model.sha256,
        pe.summary.model_sha256.clone().unwrap()
    );
    assert!(decode
        .notes
        .what_would_make_it_wrong
        .starts_with("The two runtimes read the same model.q4nx"));

    let first = rec("first_token", "ours");
    let p = first.pair.as_ref().unwrap();
    assert_eq!((first.value, p.other_value), (568.0, 591.0));
    assert_eq!(
        p.arm_medians.as_deref(),
        Some(&[591.0, 567.0, 573.0, 591.0][..])
    );
    assert_eq!(first.range, [566.0, 578.0]);
    assert_eq!(p.other_range, Some([589.0, 658.0]));

    let theirs = rec("decode_rate", "theirs");
    let p = theirs.pair.as_ref().unwrap();
    assert_eq!((theirs.value, p.other_value), (45.57, 39.25));
    assert_eq!(p.arm_order, ["this", "other", "other", "this"]);
    assert_eq!(theirs.settings.engine, "FastFlowLM flm serve (qwen3:1.7b)");
}

/// `[assert.first_token_ratio]` is refused where it cannot mean what it says: without bounds, beside an
/// `[assert.ratio]` that already compares first_token, and in a gate that is not a pair; a bound that is not
/// a positive number names its key.
#[test]
fn first_token_ratio_is_refused_where_it_cannot_judge() {
    let g = gate();
    let dir = tempfile::tempdir().unwrap();
    let load = |src: String| {
        let file = dir.path().join("g.toml");
        std::fs::write(&file, src).unwrap();
        servegate::spec::load(&file)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let table = "[assert.first_token_ratio]  # theirs / ours of the TTFT medians";
    assert!(g.source.contains(table));
    let bounds = "at_least = 0.8              #   level within the spread; ours on the per-op route (~1.06 s) gives about 0.55x\nat_most = 1.25\n";
    assert!(
        g.source.contains(bounds),
        "the gate's bounds moved: update this test"
    );

    let e = load(g.source.replace(bounds, ""));
    assert!(
        e.contains("assert.first_token_ratio") && e.contains("needs at_least, at_most or both"),
        "{e}"
    );

    let e = load(g.source.replace("at_most = 1.25\n", "at_most = -1.0\n"));
    assert!(e.contains("assert.first_token_ratio.at_most"), "{e}");

    let e = load(g.source.replace(
        "metric = \"decode\"        # published",
        "metric = \"first_token\"   # published",
    ));
    assert!(
        e.contains("[assert.ratio] already compares first_token"),
        "{e}"
    );

    let e = load(
        g.source
            .replace(bounds, "metric = \"decode\"\nat_least = 0.8\n"),
    );
    assert!(e.contains("unknown field `metric`"), "{e}");

    let smoke = std::fs::read_to_string(root().join("gates/npu-serve-smoke.toml")).unwrap();
    let e = load(format!(
        "{smoke}\n[assert.first_token_ratio]\nat_most = 1.2\n"
    ));
    assert!(e.contains("need a [pair] gate"), "{e}");
}
