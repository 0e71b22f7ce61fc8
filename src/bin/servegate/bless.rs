//! `servegate bless`: the flags, and the printing of what the library plans and writes
//! (`servegate::records::bless`); maps a refusal to the exit code.

use std::path::PathBuf;

use servegate::error::exit;
use servegate::records::bless::{self, BlessArgs, DEFAULT_CONFIDENCE, DEFAULT_HEADROOM_PCT};

/// `servegate bless`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["baseline", "floor", "limits"])))]
pub struct BlessCmd {
    /// The gate file (gates/NAME.toml).
    pub gate: PathBuf,
    /// Copy this run directory as a new window of the gate's stored baseline.
    #[arg(long, value_name = "RUN_DIR")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: the machine kind (a subdirectory, e.g. `ci-2core`); none = data/baselines/<gate>/.
    #[arg(long, value_name = "NAME", requires = "baseline")]
    pub kind: Option<String>,
    /// Derive [assert.rate] floor_tok_s from this run: the lower confidence bound of its median minus
    /// --headroom-pct (or, with --slow, the geometric mean of this fast-route run's median and the slow one's).
    #[arg(long, value_name = "RUN_DIR")]
    pub floor: Option<PathBuf>,
    /// With --floor: a run of the slow route; the floor is the geometric mean of the two medians.
    #[arg(long, value_name = "RUN_DIR", requires = "floor")]
    pub slow: Option<PathBuf>,
    /// Headroom below the lower bound, percent, 0 to below 100 (one-run floors).
    #[arg(long, default_value_t = DEFAULT_HEADROOM_PCT, value_parser = super::conventions::pct_below_100)]
    pub headroom_pct: f64,
    /// Confidence of the lower bound of the median, a fraction strictly between 0 and 1 (one-run floors).
    #[arg(long, default_value_t = DEFAULT_CONFIDENCE, value_parser = super::conventions::confidence)]
    pub confidence: f64,
    /// Derive the footprint limits the gate declares ([assert.ready] limit_ms, [assert.memory] limit_mib,
    /// [assert.cpu] limit_ms_per_token) from these runs: the largest value plus --limit-headroom-pct, rounded up.
    /// Repeat it (or list several) for several runs.
    #[arg(long, value_name = "RUN_DIR", num_args = 1..)]
    pub limits: Vec<PathBuf>,
    /// Headroom above the largest value, percent, 0 to below 1000 (footprint limits).
    #[arg(long, default_value_t = bless::DEFAULT_LIMIT_HEADROOM_PCT, value_parser = super::conventions::pct_below_1000)]
    pub limit_headroom_pct: f64,
    /// Where baselines and the ledger live.
    #[arg(long, value_name = "DIR", default_value = "data/baselines")]
    pub baselines_dir: PathBuf,
    /// Write the change (without it, only show it).
    #[arg(long)]
    pub accept: bool,
    /// Write even when `CI` is set.
    #[arg(long)]
    pub force: bool,
}

impl From<&BlessCmd> for BlessArgs {
    fn from(c: &BlessCmd) -> BlessArgs {
        BlessArgs {
            gate: c.gate.clone(),
            baseline: c.baseline.clone(),
            kind: c.kind.clone(),
            floor: c.floor.clone(),
            slow: c.slow.clone(),
            headroom_pct: c.headroom_pct,
            confidence: c.confidence,
            limits: c.limits.clone(),
            limit_headroom_pct: c.limit_headroom_pct,
            baselines_dir: c.baselines_dir.clone(),
            accept: c.accept,
            force: c.force,
        }
    }
}

/// `servegate bless`: plans, shows, and with `--accept` writes. Returns the exit code: 0 shown or written,
/// 1 the run was refused, 2 usage (CI without --force), 3 a spec problem, 5 evidence I/O, 9 a window whose
/// key differs from its baseline's.
pub fn cli(cmd: &BlessCmd) -> i32 {
    let written =
        bless::plan_here(&cmd.into(), &mut |l| errln!("bless: {l}")).and_then(|planned| {
            out!("{}", planned.shown());
            if !planned.accepted() {
                outln!("{}", bless::NOT_WRITTEN);
                return Ok(());
            }
            outln!("{}", planned.write()?);
            Ok(())
        });
    match written {
        Ok(()) => exit::PASS,
        Err(e) => {
            errln!("error: {e}");
            e.code
        }
    }
}
