//! servegate's developer tasks, kept out of the shipped crate: `cargo xtask bench-self` measures
//! servegate's own accuracy and overhead (docs/performance.md). It builds the `servegate` binary (release)
//! first and drives it as a child process; the peer clients it may install (Python, pip) never touch the
//! library.

mod bench;
mod bench_common;
mod bench_fidelity;
mod bench_floor;
mod bench_load;
mod bench_load_case;
mod bench_load_cores;
mod bench_peers_load;
mod bench_peers_parity;
mod bench_records;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "servegate developer tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// servegate's own timing accuracy and overhead against a synthetic paced stream (docs/performance.md).
    BenchSelf(bench::BenchArgs),
    /// Records checked, re-derived and rendered at scale (10,000 by default; docs/records.md).
    BenchRecords(bench_records::BenchRecordsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::BenchSelf(args) => match bench_common::build_servegate() {
            Ok(()) => bench::cli_bench_self(&args),
            Err(e) => {
                eprintln!("error: {e}");
                servegate::error::exit::EVIDENCE_ERROR
            }
        },
        Cmd::BenchRecords(args) => bench_records::cli_bench_records(&args),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
