//! What goes here: GitHub surfaces in process (the line an annotation points at). `servegate run` and the
//! harness under `GITHUB_ACTIONS=true`, and the step summary's cap, are tests/cli/github.rs.
//!
//! GitHub Actions surfaces, end to end (annotations on the TOML line, the job summary): `servegate run` on a failing gate with `GITHUB_ACTIONS=true`
//! annotates the gate file at the line that declares each failed assertion (the `floor_tok_s` line for a rate
//! failure, the `[assert.X]` header otherwise) and appends the Markdown summary to `$GITHUB_STEP_SUMMARY`
//! with the artifact link; without it nothing is annotated. And the step summary of a run with 1,000 failing
//! trials stays under GitHub's 1 MiB cap (what an earlier step wrote counts) and says how many rows were left
//! out.

#[test]
fn the_declaring_line_is_the_floor_for_rate_and_the_header_otherwise() {
    use servegate::spec::line_in;
    let text = "[gate]\nname = \"g\"\n\n[assert.route]\nfast = \"x\"\n[assert.rate]\nsource = \"server\"\nfloor_tok_s = 3.0\n\n[assert.known_answer]\nmatches = \"p\"\n";
    assert_eq!(line_in(text, "rate"), 8);
    assert_eq!(line_in(text, "route"), 4);
    assert_eq!(line_in(text, "known_answer"), 10);
    // A rate table without its floor (a spec error) points at its header; an unknown assertion or an
    // unparsable file at line 1.
    assert_eq!(line_in("[assert.rate]\nsource = \"client\"\n", "rate"), 1);
    assert_eq!(line_in("x\n\n[assert.rate]\n", "rate"), 1);
    assert_eq!(line_in(text, "spec"), 1);
    // Inline tables: the key's line.
    assert_eq!(line_in("[gate]\n[assert]\ncontent = {}\n", "content"), 3);
}
