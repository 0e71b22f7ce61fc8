//! The run directory's layout: every file and directory name of a run, in one place (docs/evidence.md
//! describes each file). Writers, loaders, redaction, replay and the reports all name files through here.

/// The gate spec as run, byte for byte.
pub const GATE_FILE: &str = "gate.toml";
/// The run summary (`RunSummary`, schema `servegate.run/1`).
pub const RUN_FILE: &str = "run.json";
/// The serve's output during the run.
pub const SERVE_LOG: &str = "serve.log";
/// The `[serve].setup` command's output, when the gate has one.
pub const SETUP_LOG: &str = "setup.log";
/// The pair summary of a pair run (`PairSummary`, schema `servegate.pair/1`).
pub const PAIR_FILE: &str = "pair.json";
/// One JSON line per finished request, appended during the run (the requests of a run that did not finish).
pub const PROGRESS_FILE: &str = "requests.jsonl";
/// The serve's `/metrics` before the first request (`[serve] clock = "metrics"`).
pub const METRICS_BEFORE: &str = "metrics.before.txt";
/// The serve's `/metrics` after the last request.
pub const METRICS_AFTER: &str = "metrics.after.txt";
/// Ending of a request's timed reads file (`NN.reads.jsonl`).
pub const READS_SUFFIX: &str = ".reads.jsonl";
/// Ending of a request's response meta file (`NN.response.json`).
pub const RESPONSE_SUFFIX: &str = ".response.json";
/// Ending of a request's body file (`NN.request.json`).
pub const REQUEST_SUFFIX: &str = ".request.json";

/// `NN.request.json` for the request at send-order `index` (00, 01, ..., warmup first).
pub fn request_file(index: usize) -> String {
    format!("{index:02}{REQUEST_SUFFIX}")
}

/// `NN.reads.jsonl` for the request at send-order `index`.
pub fn reads_file(index: usize) -> String {
    format!("{index:02}{READS_SUFFIX}")
}

/// `NN.response.json` for the request at send-order `index`.
pub fn response_file(index: usize) -> String {
    format!("{index:02}{RESPONSE_SUFFIX}")
}

/// The directory of arm `n` (1-based) of a pair run, by its role: `arm1-ours`, `arm2-theirs`.
pub fn arm_dir(n: usize, role: &str) -> String {
    format!("arm{n}-{role}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_documented() {
        assert_eq!(request_file(0), "00.request.json");
        assert_eq!(reads_file(7), "07.reads.jsonl");
        assert_eq!(response_file(12), "12.response.json");
        assert_eq!(arm_dir(2, "theirs"), "arm2-theirs");
    }
}
