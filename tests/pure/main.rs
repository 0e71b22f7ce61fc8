//! The `pure` tier: no process, no socket. The judge, the parsers, the loaders and the pages on committed
//! inputs and on evidence built in memory: the field cases (tests/data/cases), the first user's judging table,
//! load and regression judging, the metrics doc, baselines, census, coverage, records re-derivation, exports.
//! The inner loop: `cargo test --lib --test pure`. A test that starts a process (the binary, a serve, a
//! re-executed harness) or opens a socket belongs in `cli` (a real runtime: `live`).

#[path = "../fixtures/mod.rs"]
mod fixtures;

mod baselines;
mod bless;
mod cases;
mod census;
mod coverage;
mod doc_paths;
mod drift;
mod exit_codes_doc;
mod exports;
mod flm_pair;
mod github;
mod import;
mod import_honesty;
mod judge_table;
mod junit;
mod load;
mod load_consistency;
mod load_records;
mod locust;
mod log_cap;
mod metrics_doc;
mod over_limits;
mod parity;
mod privacy;
mod records;
mod regression_sim;
mod runtimes;
mod runtimes_profiles;
mod self_test;
mod serve_clocks;
mod stream_honesty;
mod vllm_bench;
