//! What goes here: `servegate bless` as a program (CI refusal without --force, concurrent blesses into one
//! baseline, the release-conditions repros run through `servegate run`). Planning and refusals on committed
//! evidence, in process, are tests/pure/bless.rs.
//!
//! `servegate bless`: a floor derived from recorded evidence round-trips the gate file (comments, order,
//! formatting, inline tables and line endings unchanged except the edited value and its provenance comment:
//! insta snapshots of the file before and after, byte diffs), a run is blessed as a baseline window only when
//! it is good evidence (its serve did not fail, its own verdicts hold, it is not already a window) and its
//! comparability key matches, concurrent blesses into one baseline all land (one lock), every accepted change
//! is one ledger line, and nothing is written in CI without --force. The recorded run is
//! tests/data/replay/reference-smoke (a real reference run, README there); the release-conditions repros
//! (tests/data/repro/bless/, README there) run gate `cutg` ([`BLESS_BASE`]) on the scripted serve
//! (fixtures::crashy: what the repros' stdlib `crashy.py` did) through `servegate run`. No timing decides
//! anything.

use std::path::{Path, PathBuf};

use crate::fixtures;
use crate::fixtures::bless::{gate_copy, ledger, restamped, run_copy, RUN};
use crate::fixtures::crashy::{crashy, die_after};
use crate::fixtures::root;
use servegate::error::exit;
use servegate::evidence::baseline;
use servegate::replay::scripted::Script;
#[test]
fn bless_refuses_bad_arguments_as_usage_and_a_file_as_run_directory_as_evidence() {
    let (t, gate) = gate_copy();
    let before = std::fs::read_to_string(&gate).unwrap();
    let run = |args: &[&str]| {
        let o = fixtures::servegate()
            .current_dir(root())
            .arg("bless")
            .arg(&gate)
            .args(args)
            .arg("--baselines-dir")
            .arg(t.path().join("baselines"))
            .env_remove("CI")
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for (flag, value) in [
        ("--headroom-pct", "100"),
        ("--headroom-pct", "nan"),
        ("--confidence", "1.5"),
        ("--confidence", "0"),
        ("--limit-headroom-pct", "-5"),
    ] {
        let (code, err) = run(&["--floor", RUN, &format!("{flag}={value}")]);
        assert_eq!(code, exit::USAGE, "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains(&format!("'{value}'")),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("cannot bound the median"), "{err}");
    }
    let (code, err) = run(&["--floor", "/dev/zero"]);
    assert_eq!(code, exit::EVIDENCE_ERROR, "{err}");
    assert!(err.contains("/dev/zero is not a directory"), "{err}");
    assert!(!err.contains("gate.toml"), "{err}");
    let missing = t.path().join("no-such-run");
    let (code, err) = run(&["--floor", missing.to_str().unwrap()]);
    assert_eq!(code, exit::EVIDENCE_ERROR, "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert_eq!(std::fs::read_to_string(&gate).unwrap(), before);
}

#[test]
fn bless_never_writes_in_ci_unless_forced() {
    let (t, gate) = gate_copy();
    let before = std::fs::read_to_string(&gate).unwrap();
    let bl = t.path().join("baselines");
    let run = |extra: &[&str], ci: Option<&str>| {
        let mut c = fixtures::servegate();
        c.current_dir(root())
            .args(["bless"])
            .arg(&gate)
            .args(["--floor", RUN, "--baselines-dir"])
            .arg(&bl)
            .args(extra);
        match ci {
            Some(v) => c.env("CI", v),
            None => c.env_remove("CI"),
        };
        let o = c.output().unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&["--accept"], Some("true"));
    assert_eq!(code, exit::USAGE, "{err}");
    assert!(err.contains("never writes in CI"), "{err}");
    assert_eq!(std::fs::read_to_string(&gate).unwrap(), before);
    // Showing the diff is fine in CI.
    let (code, out, _) = run(&[], Some("true"));
    assert_eq!(code, 0);
    assert!(out.contains("+floor_tok_s = 16.6"), "{out}");
    assert!(out.contains("not written"), "{out}");
    let (code, out, err) = run(&["--accept", "--force"], Some("true"));
    assert_eq!(code, 0, "{out}{err}");
    assert_ne!(std::fs::read_to_string(&gate).unwrap(), before);
    assert_eq!(ledger(&bl).len(), 1);
}

/// The release-conditions repros' gate `cutg` (`bless-base.toml` of tests/data/repro/bless/): 6 requests,
/// a rate floor of 5 tok/s under comments, on the serve SERVE.
const BLESS_BASE: &str = r#"[gate]
name = "cutg"
[serve]
command = SERVE
ready = "/health"
[request]
model = "m"
max_tokens = 8
temperature = 0
prompts = ["What is the capital of France?"]
repeats = 6
[assert.rate]
# a comment above the floor
floor_tok_s = 5.0   # trailing comment
"#;

/// A temp dir holding a throw-away model.gguf; and [`BLESS_BASE`] on the scripted serve playing `serve`
/// (crashy at 12.5 tok/s, the repro's 30 slowed: an 80 ms gap a busy machine does not close, so every reply
/// is measured), as text.
fn repro_scratch(serve: Script) -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("model.gguf"), b"model\n").unwrap();
    let gate = BLESS_BASE.replace("SERVE", &fixtures::scripted_command(&serve));
    (t, gate)
}

struct Out {
    code: i32,
    all: String,
}

/// `servegate ARGS` in `dir`, with `SERVEGATE_RUNS` there and no CI or report variables.
fn sg(dir: &Path, args: &[&str]) -> Out {
    let o = fixtures::servegate()
        .args(args)
        .current_dir(dir)
        .env("SERVEGATE_RUNS", dir.join("runs"))
        .env_remove("CI")
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        all: format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

/// The one run directory of gate `gate` under `dir/runs`.
fn only_run(dir: &Path, gate: &str) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs").join(gate))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().unwrap()
}

/// bless-crashed-run.sh: the serve exits 139 right after its last reply. run.json says `complete` with
/// `serve.failure` set; neither a floor nor a baseline window is taken from it, and nothing is written.
#[test]
fn a_run_whose_serve_crashed_after_its_last_reply_is_not_blessed() {
    let (t, gate) = repro_scratch(die_after(crashy(12.5), 6));
    std::fs::write(t.path().join("g.toml"), &gate).unwrap();
    let run = sg(t.path(), &["run", "-q", "g.toml"]);
    assert_eq!(run.code, 1, "{}", run.all);
    let dir = only_run(t.path(), "cutg");
    let rj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(rj["status"], "complete", "{rj}");
    assert!(
        rj["serve"]["failure"]
            .as_str()
            .is_some_and(|f| f.contains("139")),
        "{rj}"
    );
    let d = dir.to_str().unwrap();
    for what in ["--floor", "--baseline"] {
        let o = sg(t.path(), &["bless", "g.toml", what, d, "--accept"]);
        assert_eq!(o.code, exit::ASSERTION_FAILED, "{what}: {}", o.all);
        assert!(
            o.all
                .contains("the serve failed during the run (serve.failure: "),
            "{what}: {}",
            o.all
        );
        // Its rate trial fails for the same cause: said once.
        assert_eq!(
            o.all.matches("the serve failed during the run").count(),
            1,
            "{}",
            o.all
        );
    }
    assert_eq!(
        std::fs::read_to_string(t.path().join("g.toml")).unwrap(),
        gate
    );
    assert!(!t.path().join("data/baselines").exists());
}

/// bless-inline-table.sh: `rate = { floor_tok_s = 5.0 }` under `[assert]`. The blessed gate still parses
/// (`servegate check`), the floor is the derived one, and a byte diff touches only the floor's line and the
/// two provenance lines above it; a CRLF copy stays CRLF, and a person's comment that starts like the
/// provenance is kept.
#[test]
fn blessing_a_floor_in_an_inline_table_keeps_the_gate_valid_and_its_bytes() {
    let (t, mut gate) = repro_scratch(crashy(12.5));
    gate.truncate(gate.find("[assert.rate]").unwrap());
    gate.push_str("[assert]\n# servegate bless: keep it above 4 (a note of mine)\nrate = { floor_tok_s = 5.0 }  # inline\n");
    let g = t.path().join("g.toml");
    std::fs::write(&g, &gate).unwrap();
    let crlf = t.path().join("crlf.toml");
    std::fs::write(&crlf, gate.replace('\n', "\r\n")).unwrap();
    assert_eq!(sg(t.path(), &["check", "g.toml"]).code, 0);
    let run = sg(t.path(), &["run", "-q", "g.toml"]);
    assert_eq!(run.code, 0, "{}", run.all);
    let dir = only_run(t.path(), "cutg");
    let d = dir.to_str().unwrap();
    for (file, eol) in [("g.toml", "\n"), ("crlf.toml", "\r\n")] {
        let path = t.path().join(file);
        let before = std::fs::read(&path).unwrap();
        let o = sg(t.path(), &["bless", file, "--floor", d, "--accept"]);
        assert_eq!(o.code, 0, "{file}: {}", o.all);
        let after = std::fs::read(&path).unwrap();
        let c = sg(t.path(), &["check", file]);
        assert_eq!(c.code, 0, "{file}: {}", c.all);
        let floor = servegate::spec::load(&path)
            .unwrap()
            .assertions
            .rate
            .unwrap()
            .floor_tok_s;
        let l = ledger(&t.path().join("data/baselines"));
        assert_eq!(l.last().unwrap().value, Some(floor));
        assert_eq!(l.last().unwrap().previous, Some(5.0));
        // Byte diff: the lines of the file before are all there, in order, but the floor's; the new lines
        // are the two provenance lines and the floor's line, with the file's line ending.
        let lines = |b: &[u8]| -> Vec<Vec<u8>> {
            b.split_inclusive(|c| *c == b'\n')
                .map(<[u8]>::to_vec)
                .collect()
        };
        let (old, new) = (lines(&before), lines(&after));
        let added: Vec<String> = new
            .iter()
            .filter(|l| !old.contains(l))
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        assert_eq!(added.len(), 3, "{file}: {added:?}");
        assert!(
            added[0].starts_with("# servegate bless 20")
                && added[1].starts_with("# servegate bless rule: "),
            "{added:?}"
        );
        assert_eq!(
            added[2],
            format!("rate = {{ floor_tok_s = {floor:.1} }}  # inline{eol}")
        );
        assert!(added
            .iter()
            .all(|l| l.ends_with(eol) && !l[..l.len() - eol.len()].contains('\r')));
        let kept: Vec<&Vec<u8>> = new.iter().filter(|l| old.contains(l)).collect();
        let old_kept: Vec<&Vec<u8>> = old.iter().filter(|l| !l.starts_with(b"rate = ")).collect();
        assert_eq!(kept, old_kept, "{file}");
        let text = String::from_utf8(after).unwrap();
        assert!(text.contains(&format!(
            "# servegate bless: keep it above 4 (a note of mine){eol}"
        )));
        // Blessed again: the provenance is replaced, the person's comment stays.
        let o = sg(t.path(), &["bless", file, "--floor", d, "--accept"]);
        assert_eq!(o.code, 0, "{}", o.all);
        let again = std::fs::read_to_string(&path).unwrap();
        assert_eq!(again.lines().count(), text.lines().count(), "{again}");
        assert_eq!(again.matches("# servegate bless 20").count(), 1, "{again}");
        assert!(again.contains("# servegate bless: keep it above 4 (a note of mine)"));
    }
}

/// bless-concurrent.sh: five `bless --baseline --accept` at once into one baseline, four distinct runs and a
/// copy of one of them. Every distinct run lands as a window in the manifest and as a ledger line (one lock
/// for the baseline and the ledger, each writer planning again under it); the copy is refused as already
/// blessed, whichever of the two came first.
#[test]
fn concurrent_blesses_into_one_baseline_all_land() {
    let t = tempfile::tempdir().unwrap();
    let runs = t.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut dirs: Vec<PathBuf> = (1..=4)
        .map(|i| {
            restamped(
                &run_copy(&runs, &format!("w{i}")),
                &format!("2026-11-29T19:0{i}:00Z"),
            )
        })
        .collect();
    dirs.push(restamped(
        &run_copy(&runs, "w1-copy"),
        "2026-11-29T19:01:00Z",
    ));
    let bl = t.path().join("baselines");
    let children: Vec<_> = dirs
        .iter()
        .map(|d| {
            fixtures::servegate()
                .current_dir(root())
                .args(["bless", "gates/reference-smoke.toml", "--baseline"])
                .arg(d)
                .args(["--kind", "race", "--accept", "--baselines-dir"])
                .arg(&bl)
                .env_remove("CI")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap()).collect();
    let text: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert_eq!(codes[1..4], [0, 0, 0], "{text:?}");
    // w1 and its copy: one landed, the other was refused as the same run.
    let mut pair = [codes[0], codes[4]];
    pair.sort();
    assert_eq!(pair, [0, exit::ASSERTION_FAILED], "{text:?}");
    assert!(
        text.iter().any(|t| t.contains("one run is one window")),
        "{text:?}"
    );
    let b = baseline::load(&bl.join("reference-smoke").join("race")).unwrap();
    let mut w = b.manifest.windows.clone();
    w.sort();
    assert_eq!(w.len(), 4, "{w:?}");
    assert!(
        w[1..] == ["w2", "w3", "w4"] && ["w1", "w1-copy"].contains(&w[0].as_str()),
        "{w:?}"
    );
    assert_eq!(b.manifest.sources.len(), 4);
    let dirs_on_disk = std::fs::read_dir(bl.join("reference-smoke").join("race"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(dirs_on_disk, 4);
    let l = ledger(&bl);
    assert_eq!(l.len(), 4, "{l:?}");
    let mut lw: Vec<String> = l
        .iter()
        .map(|e| {
            e.window
                .clone()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    lw.sort();
    assert_eq!(lw, w);
    // The lock's holder note is gone once every writer is done.
    assert!(!bl.join(".bless.lock.holder").exists());
}

/// A gate whose `[assert.regression] baseline` is outside the checkout: its first run cannot read the
/// baseline and says which bless writes it; that bless (as said) writes there, with its ledger line beside it,
/// nothing into the checkout's `data/`; the next run is compared with it (one window: INDETERMINATE, saying
/// so), and blessed too, the third run is compared with two windows and PASSes.
#[test]
fn bless_baseline_writes_where_the_gate_reads_it() {
    let (t, gate) = repro_scratch(crashy(12.5));
    let outside = tempfile::tempdir().unwrap();
    let bl = outside.path().join("x").join("syn-plain");
    let gate = format!(
        "{gate}[assert.regression]\nmetric = \"decode\"\nbaseline = \"{}\"\nmax_drop_pct = 90.0\nmax_load_ratio = 1000.0\n",
        bl.display()
    );
    std::fs::write(t.path().join("g.toml"), &gate).unwrap();
    let runs = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(t.path().join("runs").join("cutg"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    // Runs the gate; blesses the run it made as the message says. The run's output.
    let run_and_bless = |i: usize| -> String {
        let before = runs();
        let o = sg(t.path(), &["run", "g.toml"]);
        let dir = runs().into_iter().find(|d| !before.contains(d)).unwrap();
        let b = sg(
            t.path(),
            &[
                "bless",
                "g.toml",
                "--baseline",
                dir.to_str().unwrap(),
                "--accept",
            ],
        );
        assert_eq!(b.code, 0, "{}", b.all);
        assert!(bl.join(baseline::MANIFEST_FILE).is_file(), "{}", b.all);
        assert_eq!(ledger(bl.parent().unwrap()).len(), i, "{}", b.all);
        assert!(!t.path().join("data").exists(), "{}", b.all);
        o.all
    };
    let first = run_and_bless(1);
    assert!(
        first.contains("regression FAIL")
            && first
                .contains("(`servegate bless g.toml --baseline RUN_DIR --accept` writes it there)"),
        "{first}"
    );
    let second = run_and_bless(2);
    assert!(!second.contains("cannot be read"), "{second}");
    // One window gives no between-window spread. A reply the client was too late to time (a busy runner)
    // leaves the run with fewer values than the window, judged unmatched (its confidence unattainable with
    // so few): INDETERMINATE all the same.
    assert!(second.contains("regression INDETERMINATE"), "{second}");
    assert!(
        second.contains("the baseline has 1 window")
            || second.contains(fixtures::CLIENT_LATE)
            || second.contains("unattainable with n="),
        "{second}"
    );
    let third = sg(t.path(), &["run", "g.toml"]);
    assert!(third.all.contains("regression PASS"), "{}", third.all);
    assert_eq!(third.code, 0, "{}", third.all);
}
