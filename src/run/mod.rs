//! Running gates: the runner (`servegate run`), the libtest-mimic harness and the self-test.

mod contract;
mod detect;
pub mod harness;
pub mod init;
mod lifecycle;
pub mod load;
pub mod load_parity;
mod load_sweep;
pub mod load_tool;
mod pair;
mod reach;
pub mod runner;
mod scrub;
pub mod selftest;
mod send;
mod setup;
mod single;
mod step;
