//! Unit tests of `bless`: the floor rule, the gate file edit, refusals, the plans.

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
    // A control character escaped once (it was escaped, then quoted with Debug: `"a\\u{1b}[31m"`).
    let e = check_kind("a\u{1b}[31m").unwrap_err();
    assert!(e.starts_with(r#"--kind "a\u{1b}[31m" is not plain"#), "{e}");
    assert!(check_kind(&"k".repeat(65)).is_err());
}

#[test]
fn a_limit_is_the_median_upper_bound_plus_headroom_mirroring_the_floor() {
    // n = 6 at 95 %: the lower bound is X(1), the upper X(6) (the sign test's order statistics mirrored).
    let d = derive_limit(
        &[300.0, 210.0, 250.0, 500.0, 220.0, 240.0],
        Metric::Ttft,
        0.95,
        10.0,
    )
    .unwrap();
    assert_eq!(d.limit, 550.0);
    assert_eq!(d.n, 6);
    assert_eq!(d.median, 245.0);
    assert!(
        d.rule.contains("order statistic 6 of 6") && d.rule.contains("500 ms"),
        "{}",
        d.rule
    );
    // n = 10: the upper bound is X(9) (k = 2), not the largest value.
    let v: Vec<f64> = (1..=10).map(|i| i as f64 * 100.0).collect();
    assert_eq!(
        derive_limit(&v, Metric::Ttft, 0.95, 0.0).unwrap().limit,
        900.0
    );
    // Rounded up, never down: a limit below what was measured would fail at once.
    let d = derive_limit(&[10.01; 5], Metric::Ttft, 0.95, 0.0).unwrap();
    assert!(d.limit >= 10.01, "{}", d.limit);
    assert!(derive_limit(&[1.0, 2.0, 3.0, 4.0], Metric::Ttft, 0.95, 10.0).is_err());
    assert!(derive_limit(&[1.0; 6], Metric::Ttft, 0.95, 100.0).is_err());
}

#[test]
fn a_load_run_is_refused_as_a_load_run_not_for_its_answered_requests() {
    let gates = Path::new(env!("CARGO_MANIFEST_DIR")).join("gates");
    let gate_file = gates.join("reference-load.toml");
    let run = tempfile::tempdir().unwrap();
    std::fs::copy(&gate_file, run.path().join(layout::GATE_FILE)).unwrap();
    let bl = tempfile::tempdir().unwrap();
    let e = plan_baseline(
        &gate_file,
        run.path(),
        None,
        bl.path(),
        "2026-12-07T00:00:00Z",
    )
    .unwrap_err();
    assert_eq!(e.code, exit::USAGE, "{e}");
    assert!(e.message.contains("load runs cannot be blessed"), "{e}");
    assert!(e.message.contains("servegate records add --run"), "{e}");
    assert!(!e.message.contains("answered"), "{e}");
    assert_eq!(std::fs::read_dir(bl.path()).unwrap().count(), 0);
}

#[test]
fn a_baseline_is_blessed_where_the_gate_reads_it() {
    let t = tempfile::tempdir().unwrap();
    let text = |baseline: &str| {
        format!(
            "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:1\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\n\
             prompts = [\"p\"]\nrepeats = 6\n[assert.regression]\nmetric = \"decode\"\n{baseline}\n\
             max_drop_pct = 50.0\n"
        )
    };
    let root = t.path().join("data").join("baselines");
    let out = t.path().join("elsewhere").join("syn-plain");
    let f = t.path().join("g.toml");
    std::fs::write(
        &f,
        text(&format!("baseline = {:?}", out.display().to_string())),
    )
    .unwrap();
    let g = spec::load(&f).unwrap();
    let to = baseline_target(Some(&g), &f, None, &root);
    assert_eq!(to.dir, out);
    assert_eq!(to.ledger_root, t.path().join("elsewhere"));
    assert_eq!(to.note, None);
    // Several: --kind picks one by its last name; none picked: the default, with a note naming them.
    let other = t.path().join("elsewhere").join("ci-2core");
    std::fs::write(
        &f,
        text(&format!(
            "baselines = [{:?}, {:?}]",
            out.display().to_string(),
            other.display().to_string()
        )),
    )
    .unwrap();
    let g = spec::load(&f).unwrap();
    assert_eq!(
        baseline_target(Some(&g), &f, Some("ci-2core"), &root).dir,
        other
    );
    let to = baseline_target(Some(&g), &f, None, &root);
    assert_eq!(to.dir, root.join("g"));
    assert_eq!(to.ledger_root, root);
    assert!(to.note.unwrap().contains("syn-plain"));
    // The default among them: the baselines root's ledger, as before.
    std::fs::write(
        &f,
        text(&format!(
            "baseline = {:?}",
            root.join("g").display().to_string()
        )),
    )
    .unwrap();
    let g = spec::load(&f).unwrap();
    let to = baseline_target(Some(&g), &f, None, &root);
    assert_eq!(
        (to.dir, to.ledger_root, to.note),
        (root.join("g"), root.clone(), None)
    );
}
