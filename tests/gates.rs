//! The gate report: one trial per assertion of every gate in `gates/` (or `$SERVEGATE_GATES`).
//! Run with `cargo test --test gates`; see README.md.

fn main() -> std::process::ExitCode {
    servegate::run::harness::main()
}
