//! Coverage: which models each runtime serves, from gate evidence (the page), and a peer's model list against
//! our registry (the census). pages/coverage.md.
//!
//! - [`page`] — `servegate coverage [--check]`: rows (family, size, quantization) × columns (runtimes) from the
//!   newest run of every matrix gate entry (`<gate>[<model>]`), rendered by pages/templates/coverage.md.
//! - [`census`] — `servegate census --peer FILE [--check]`: the gap list by family root.
//! - [`conformance`] — `servegate conformance [--check]`: checks (rows) × runtimes (columns) from the newest
//!   run of every `[contract]` gate, rendered by pages/templates/conformance.md (docs/contract.md).

pub mod census;
pub mod conformance;
pub mod page;

use std::collections::BTreeMap;
use std::path::Path;

/// For each family root with a matrix-gate run under `runs` (the root of its entry's name, and of its `family`
/// row alias), the newest cell: what the census counts as settled. Unreadable runs are left out.
pub fn evidence_roots(runs: &Path) -> BTreeMap<String, census::Settled> {
    let mut out: BTreeMap<String, census::Settled> = BTreeMap::new();
    for c in page::cells(runs) {
        let root = census::family_root(&c.model);
        let s = census::Settled {
            evidence: c.evidence.clone(),
            state: c.state.symbol().to_string(),
            verified_utc: c.verified_utc.clone(),
        };
        match out.get(&root) {
            Some(old) if old.verified_utc >= s.verified_utc => {}
            _ => {
                out.insert(root, s);
            }
        }
    }
    out
}
