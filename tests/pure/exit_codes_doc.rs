//! What goes here: the exit codes have one list (`servegate::error::exit::CODES`, which `servegate --help`
//! prints): README's "Exit codes" paragraph and docs/ci.md's "Exit codes" table name every code of it, in
//! order, and no other (a newcomer found README and `--help` listing 0-7 where docs/ci.md listed 0-10).

use servegate::error::exit;

fn read(rel: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The codes a text names as `N ` after `Exit codes: ` or `; ` (README's paragraph form), in order.
fn paragraph_codes(p: &str) -> Vec<i32> {
    let body = p.strip_prefix("Exit codes: ").unwrap();
    body.split("; ")
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn readme_and_ci_doc_list_every_exit_code_of_the_one_list() {
    let codes: Vec<i32> = exit::CODES.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        codes,
        (0..=10).collect::<Vec<_>>(),
        "one code each, in order"
    );

    let readme = read("README.md");
    let start = readme
        .find("\nExit codes: ")
        .expect("README has its Exit codes paragraph")
        + 1;
    let para = readme[start..]
        .split("\n\n")
        .next()
        .unwrap()
        .replace('\n', " ");
    // The paragraph's numbered codes before the signal codes (130/143/129), which are not run outcomes.
    let named: Vec<i32> = paragraph_codes(&para)
        .into_iter()
        .filter(|c| *c < 100)
        .collect();
    assert_eq!(named, codes, "README's exit codes: {para}");

    let ci = read("docs/ci.md");
    let start = ci
        .find("## Exit codes")
        .expect("docs/ci.md has its Exit codes section");
    let rows: Vec<i32> = ci[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            l.trim_start_matches('|')
                .split('|')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(rows, codes, "docs/ci.md's exit code table");

    let help = exit::summary();
    for (c, words) in exit::CODES {
        assert!(help.contains(&format!("{c} {words}")), "{help}");
    }
}

/// action.yml's `exit-code` output says every code of the one list, in order, with its words (a fresh-user
/// trial found it listing six of the eleven).
#[test]
fn the_actions_exit_code_output_lists_every_exit_code() {
    let action = read("action.yml");
    let line = action
        .lines()
        .skip_while(|l| l.trim() != "exit-code:")
        .find(|l| l.trim_start().starts_with("description:"))
        .expect("the exit-code output's description");
    let list: Vec<String> = exit::CODES
        .iter()
        .map(|(c, w)| format!("{c} {w}"))
        .collect();
    assert!(
        line.contains(&format!("({};", list.join(", "))),
        "{line}\nwant: {}",
        list.join(", ")
    );
}
