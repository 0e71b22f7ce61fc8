//! Masking the API key in a finished run's directory: the walk and the rewrite around the judge's pure
//! per-file mask ([`crate::judge::redact::scrub_file`]; what is masked where is described there).

use std::path::{Path, PathBuf};

/// Masks `secret` where the serve's own bytes are kept under `dir` (recursively, for pair arms):
/// `serve.log` and `setup.log` as bytes, `NN.reads.jsonl` in the decoded body (left alone if it does not
/// decode), `NN.response.json` in its string values. Other files are never touched. Changed files are
/// rewritten atomically; returns each with its count. Unreadable files are skipped.
pub(crate) fn scrub_dir(dir: &Path, secret: &str) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            out.extend(scrub_dir(&p, secret));
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some((new, n)) = crate::judge::redact::scrub_file(name, bytes, secret) else {
            continue;
        };
        if n > 0 && crate::evidence::write_atomic(&p, &new).is_ok() {
            out.push((p, n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::reads::TimedRead;

    #[test]
    fn scrub_leaves_servegate_files_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let key = "gate-key-123";
        std::fs::write(
            d.join(crate::evidence::layout::RUN_FILE),
            format!("{{\"gate\": \"{key}\"}}"),
        )
        .unwrap();
        std::fs::write(
            d.join(crate::evidence::layout::GATE_FILE),
            format!("name = \"{key}\"\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("00.request.json"),
            format!("{{\"model\": \"{key}\"}}"),
        )
        .unwrap();
        std::fs::write(
            d.join(crate::evidence::layout::SERVE_LOG),
            format!("auth {key}\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("00.response.json"),
            format!("{{\"status\": 200, \"headers\": {{\"x-echo\": \"Bearer {key}\"}}, \"transport_error\": null}}"),
        )
        .unwrap();
        let reads = vec![TimedRead {
            recv_ms: None,
            t_ms: 1.0,
            bytes: format!("data: {key}\n\n").into_bytes(),
        }];
        std::fs::write(d.join("00.reads.jsonl"), crate::io::reads::encode(&reads)).unwrap();
        let before: Vec<String> = ["run.json", "gate.toml", "00.request.json"]
            .iter()
            .map(|f| std::fs::read_to_string(d.join(f)).unwrap())
            .collect();
        let changed = scrub_dir(d, key);
        let names: Vec<String> = changed
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["00.reads.jsonl", "00.response.json", "serve.log"]);
        let after: Vec<String> = ["run.json", "gate.toml", "00.request.json"]
            .iter()
            .map(|f| std::fs::read_to_string(d.join(f)).unwrap())
            .collect();
        assert_eq!(before, after);
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("00.response.json")).unwrap())
                .unwrap();
        assert_eq!(meta["headers"]["x-echo"], "Bearer ************");
        assert!(meta["transport_error"].is_null());
        let r =
            crate::io::reads::decode(&std::fs::read_to_string(d.join("00.reads.jsonl")).unwrap())
                .unwrap();
        assert_eq!(r[0].bytes, b"data: ************\n\n");
        assert_eq!(r[0].t_ms, 1.0);
    }
}
