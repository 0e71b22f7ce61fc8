//! `servegate bless`: the library plans and writes (`servegate::records::bless`); this module maps its
//! refusal to the exit code and prints it.

use servegate::error::exit;
use servegate::records::bless::{self, BlessArgs};

/// `servegate bless`: plans, shows, and with `--accept` writes. Returns the exit code: 0 shown or written,
/// 1 the run was refused, 2 usage (CI without --force), 3 a spec problem, 5 evidence I/O, 9 a window whose
/// key differs from its baseline's.
pub fn cli(args: &BlessArgs) -> i32 {
    match bless::run(args) {
        Ok(()) => exit::PASS,
        Err(e) => {
            servegate::errln!("error: {e}");
            e.code
        }
    }
}
