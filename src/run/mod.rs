//! Running gates: the runner (`servegate run`), the libtest-mimic harness and the self-test.

pub mod harness;
pub mod load;
pub mod runner;
pub mod selftest;
