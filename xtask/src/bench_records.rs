//! `cargo xtask bench-records [--n 10000]`: records checked and rendered at scale (the target: "10,000 records
//! checked and rendered in under 1 s on one core"). Measured here, never in a timed test. It writes `n`
//! records (copies of a committed published record with distinct ids, dates and values, plus a share of
//! copies of the committed reference gate_run record, which cite the committed evidence) to a temp
//! directory and times, each once: `records check`'s validation (`record::check_dir`), the re-derivation of
//! the gate_run records (`record::verify_dir`), rendering both pages, and `leaderboard --check`'s diff of the
//! rendered page against a CRLF copy of itself (every line differs: the worst case for a diff).

use std::path::Path;
use std::time::Instant;

use servegate::records::{leaderboard, record};

/// `bench-records` arguments.
#[derive(Debug, clap::Args)]
pub struct BenchRecordsArgs {
    /// Number of records.
    #[arg(long, default_value_t = 10_000)]
    pub n: usize,
    /// How many of them are gate_run records re-derived from the committed reference evidence.
    #[arg(long, default_value_t = 100)]
    pub gate_runs: usize,
}

fn edit(text: &str, id_from: &str, id_to: &str, date: Option<&str>) -> String {
    let mut t = text.replace(id_from, id_to);
    if let Some(d) = date {
        t = t.replace("\"date\": \"2026-11-11\"", &format!("\"date\": \"{d}\""));
    }
    t
}

/// Runs the bench from the repository root; returns the exit code.
pub fn cli_bench_records(args: &BenchRecordsArgs) -> i32 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Err(e) = std::env::set_current_dir(&root) {
        eprintln!("error: {}: {e}", root.display());
        return 5;
    }
    let published = "lfm25-12b-thinking-perop-decode-20261111";
    let gate_run = "smollm2-135m-q4_1-llamacpp-1thread-20261129-decode-rate";
    let (Ok(pub_text), Ok(run_text)) = (
        std::fs::read_to_string(format!("data/records/{published}.json")),
        std::fs::read_to_string(format!("data/records/{gate_run}.json")),
    ) else {
        eprintln!("error: the committed records are missing");
        return 5;
    };
    let dir = match tempfile_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 5;
        }
    };
    let records_dir = dir.join("records");
    std::fs::create_dir_all(&records_dir).expect("temp dir");
    let gate_runs = args.gate_runs.min(args.n);
    for i in 0..args.n {
        let (id, text) = if i < gate_runs {
            let id = format!("run-{i:05}");
            // Its evidence (`source.evidence`, relative to the records' parent `data/`) named from the
            // repository root, where the copies are read.
            let text = edit(&run_text, gate_run, &id, None)
                .replace("\"records/evidence/", "\"data/records/evidence/");
            (id.clone(), text)
        } else {
            let id = format!("pub-{i:05}");
            let date = format!("2026-{:02}-{:02}", 1 + i % 12, 1 + i % 28);
            (id.clone(), edit(&pub_text, published, &id, Some(&date)))
        };
        std::fs::write(records_dir.join(format!("{id}.json")), text).expect("write");
    }
    let t = Instant::now();
    let checked = record::check_dir(&records_dir).expect("read");
    let t_check = t.elapsed().as_secs_f64();
    let bad: usize = checked.iter().filter(|c| !c.problems.is_empty()).count();
    let t = Instant::now();
    let verified = record::verify_dir(&records_dir).expect("read");
    let t_verify = t.elapsed().as_secs_f64();
    let bad_v: usize = verified.iter().filter(|c| !c.problems.is_empty()).count();
    let records: Vec<record::Record> = checked.into_iter().filter_map(|c| c.record).collect();
    let t = Instant::now();
    let pages = leaderboard::render(&records, "../data/records").expect("render");
    let t_render = t.elapsed().as_secs_f64();
    let crlf = pages.markdown.replace('\n', "\r\n");
    let t = Instant::now();
    let diff = leaderboard::unified_diff("committed", "rendered", &crlf, &pages.markdown, 3);
    let t_diff = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "bench-records: {} records ({gate_runs} gate_run), {} invalid after check, {} after re-derivation",
        args.n, bad, bad_v
    );
    println!(
        "  check (validate, ids, pair cross-check): {:.3} s",
        t_check
    );
    println!(
        "  records check (check + re-derive {gate_runs} from evidence): {:.3} s",
        t_verify
    );
    println!(
        "  render both pages: {:.3} s ({} + {} bytes)",
        t_render,
        pages.markdown.len(),
        pages.html.len()
    );
    println!(
        "  leaderboard --check diff vs a CRLF page: {:.3} s ({} lines printed)",
        t_diff,
        diff.lines().count()
    );
    let total = t_check + t_render + t_diff;
    println!("  check + render + diff: {total:.3} s (target: under 1 s on one core)");
    if bad > 0 || bad_v > 0 {
        1
    } else {
        0
    }
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("servegate-bench-records-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
