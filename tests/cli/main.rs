//! The `cli` tier: the `servegate` binary (and the library's serve, harness and client) against scripted and
//! synthetic serves and committed evidence, one module per component. No real runtime: a test that needs the
//! reference serve, llama-cpp-python or vLLM belongs in `live`; one that needs no process and no socket
//! belongs in `pure`. `cargo test --test cli` (minutes on two cores).

#[path = "../fixtures/mod.rs"]
mod fixtures;

mod action;
mod bisect;
mod bless;
mod busy_runner;
mod cases;
mod census;
mod command_line;
mod comparability;
mod contract;
mod conventions;
mod coverage;
mod drift;
mod escaping;
mod evidence;
mod exports;
mod false_passes;
mod footprint;
mod github;
mod harness_output;
mod hold;
mod import;
mod init;
mod input_files;
mod inspect;
mod interruption;
mod judge;
mod junit;
mod load;
mod load_cores;
mod load_locust;
mod load_parity;
mod load_vllm_bench;
mod log_cap;
mod matrix_runs;
mod output_snapshots;
mod over_limits;
mod privacy;
mod progress;
mod provisioning;
mod ready_dialect;
mod records;
mod records_proof;
mod regression;
mod regression_load;
mod reliability;
mod replay;
mod request_accounting;
mod run_result;
mod runtimes;
mod scripted_serve;
mod self_test;
mod serve_lifecycle;
mod spec_refusals;
mod stamped_reads;
mod stdout_errors;
mod stream_honesty;

/// Not a test of its own: with `fixtures::HARNESS_ENTRY` set, this re-executed test binary is the gates harness
/// (`fixtures::harness` starts it; the modules that test the harness as a program use it).
#[test]
fn harness_child() {
    fixtures::harness_child();
}
