//! A busy runner is not a slow serve (judge/busy.rs): the scripted serve is pinned to one CPU beside three
//! busy loops pinned to the same CPU, so it gets about a quarter of it whatever else the machine runs (more
//! load only holds it off more). A serve slow because it was held off the CPU is INDETERMINATE, naming the
//! hold; a serve slow for its own reasons (it sleeps) on the same held CPU still FAILs.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use servegate::replay::scripted::Script;

use crate::fixtures;

/// Busy loops pinned to one CPU, killed when dropped (and bounded by `timeout` should the test be killed).
struct Hogs(Vec<Child>);

impl Hogs {
    fn on(cpu: usize, n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    Command::new("timeout")
                        .args(["-s", "KILL", "120", "taskset", "-c", &cpu.to_string()])
                        .args(["sh", "-c", "while :; do :; done"])
                        .process_group(0)
                        .spawn()
                        .expect("timeout and taskset (coreutils, util-linux)")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        // The whole group: killing `timeout` alone would orphan the loop it runs.
        for c in &mut self.0 {
            // SAFETY: kill(2) on a process group this test created.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// The first CPU this test may run on.
fn a_cpu() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split([',', '-']).next().unwrap().parse().unwrap()
}

/// A gate starting `script` pinned to `cpu`: one warmup, four judged requests, a first-token limit of
/// 300 ms.
fn gate(dir: &Path, script: &Script, cpu: usize) -> PathBuf {
    let serve = fixtures::scripted_command(script);
    let pinned = format!(
        "[\"taskset\", \"-c\", \"{cpu}\", {}",
        serve.trim_start_matches('[')
    );
    let text = format!(
        r#"[gate]
name = "busy"
[serve]
command = {pinned}
ready_timeout_s = 60
stop_grace_s = 2
[request]
model = "fake-chat"
max_tokens = 16
timeout_s = 60
warmup = 1
repeats = 4
prompts = ["What is the capital of France?"]
[assert.first_token]
limit_ms = 300
"#
    );
    let p = dir.join("busy.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn run(gate: &Path, runs: &Path) -> (i32, String) {
    let out = fixtures::clean(&mut fixtures::servegate())
        .args(["run", "--runs"])
        .arg(runs)
        .arg(gate)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), fixtures::text(&out))
}

fn first_token_line(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with("first_token "))
        .unwrap_or_else(|| panic!("no first_token line: {stdout}"))
}

#[test]
fn a_serve_held_off_its_cpu_is_indeterminate_and_a_sleeping_one_still_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let cpu = a_cpu();
    let _hogs = Hogs::on(cpu, 3);

    // 120 ms of CPU before each reply's head, on one worker thread (as a serve's decode loop), then nine
    // tokens 10 ms apart: alone on its CPU its first token comes in ~125 ms; beside three busy loops, in
    // ~480 ms or more, most of it on the run queue. Given back each request's hold (its wait over its whole
    // time, 120/s + 90 ms at a share s of the CPU), the median is under 120 + 90 = 210 ms, within
    // the 300 ms limit at any share.
    let mut burns = fixtures::chat_script("Paris is the capital and largest city of France.");
    burns.cost.cpu_ms_per_chat = 120.0;
    burns.cost.burn_on_worker = true;
    burns.reply.token_ms = 10.0;
    // Beside the hogs the client itself may be too late to time a first token (a busy machine's own
    // scheduling, "not measured"): then the run is tried again (fixtures::timed_by_the_client).
    let (code, stdout) = fixtures::timed_by_the_client(
        3,
        || run(&gate(tmp.path(), &burns, cpu), &tmp.path().join("a")),
        |(_, out)| first_token_line(out).contains("busy runner, not a slow serve"),
        |(_, out)| out.clone(),
    );
    let line = first_token_line(&stdout);
    assert!(
        line.contains("first_token INDETERMINATE busy runner, not a slow serve: median "),
        "{stdout}"
    );
    assert_eq!(code, 8, "INDETERMINATE exits 8: {stdout}");

    // The same held CPU, but the serve sleeps 500 ms before its first token: no run-queue wait explains
    // that, and it fails.
    // Its tokens 40 ms apart: a client that a busy machine keeps from reading for a few ms still reads the
    // first token alone (at 4 ms apart, a late read took the first two together on a loaded 2-core runner,
    // and every TTFT was rightly "not measured": INDETERMINATE, not the FAIL this case proves).
    let mut sleeps = fixtures::chat_script("Paris is the capital and largest city of France.");
    sleeps.reply.first_token_ms = 500.0;
    sleeps.reply.token_ms = 40.0;
    let (code, stdout) = fixtures::timed_by_the_client(
        3,
        || run(&gate(tmp.path(), &sleeps, cpu), &tmp.path().join("b")),
        |(_, out)| first_token_line(out).contains("first_token FAIL "),
        |(_, out)| out.clone(),
    );
    let line = first_token_line(&stdout);
    assert!(line.contains("first_token FAIL "), "{stdout}");
    assert!(!line.contains("not a slow serve"), "{stdout}");
    assert_eq!(code, 1, "{stdout}");
}
