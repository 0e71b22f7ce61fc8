//! Runs Locust's distributed mode for `[load] driver = "locust"` (docs/load.md, "Drivers"): a master and
//! `locust_workers` workers on this host, in one process group of their own (killed with the runner, like a
//! serve), with servegate's locustfile (embedded here, written into the point's `locust/` directory so the
//! evidence holds the exact file that ran). The master holds the plan and hands out request indexes (one
//! central closed-loop schedule), the workers send and record, the master writes one `worker-<k>.jsonl` per
//! worker; this module reads them back and merges them ([`servegate_core::evidence::locust::merge`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::evidence::locust::{self as rec, Merge, LOCUST_VERSION, PLAN_SCHEMA};
use crate::io::load_client::Target;
use crate::spec::load::LocustSpec;

/// servegate's locustfile (`scripts/locust/servegate_locustfile.py`).
pub const LOCUSTFILE: &str = include_str!("../../scripts/locust/servegate_locustfile.py");
/// Its name in a point's `locust/` directory.
pub const LOCUSTFILE_NAME: &str = "servegate_locustfile.py";
/// The directory under a point's evidence that holds the Locust run (plan, locustfile, logs, records).
pub const LOCUST_DIR: &str = "locust";
/// Longest the master waits for every worker to join before it gives up (and the point records nothing),
/// seconds: a local worker joins within seconds, a remote one is started by hand.
pub const WORKERS_WAIT_S: u64 = 120;
/// The command that provisions Locust (said when it is missing).
pub const PROVISION: &str = "scripts/provision-locust.sh";

/// The Python of the provisioned Locust: `$SERVEGATE_LOCUST_PYTHON`, else
/// `{cache}/venv-locust-<LOCUST_VERSION>/bin/python` (`{cache}`: `$SERVEGATE_CACHE`, default
/// `~/.cache/servegate`). Err says how to provision it.
pub fn locust_python() -> Result<PathBuf, String> {
    crate::io::tool::provisioned_python(
        "SERVEGATE_LOCUST_PYTHON",
        &format!("venv-locust-{LOCUST_VERSION}"),
        PROVISION,
        "Locust",
        &format!("locust=={LOCUST_VERSION}"),
    )
}

/// One Locust run of a point: the plan (request bodies in order, `warmup` of them first) at `concurrency`
/// users, sent to `target`.
pub struct LocustPlan<'a> {
    /// The driver's keys.
    pub spec: &'a LocustSpec,
    /// Where requests go.
    pub target: &'a Target,
    /// Request bodies (JSON bytes), warmup first.
    pub bodies: &'a [Vec<u8>],
    /// How many of `bodies` are warmups.
    pub warmup: usize,
    /// Users (closed-loop slots) over all workers.
    pub concurrency: u32,
    /// No judged request is granted after this long from the first judged grant.
    pub deadline: Option<Duration>,
    /// Each request ends by then.
    pub timeout: Duration,
}

/// What a Locust run gave: the merged records, Locust's version as the master stated it, and notes
/// (a master that did not finish cleanly, with where its log is).
pub struct LocustRun {
    /// The workers' records merged.
    pub merge: Merge,
    /// `locust.__version__` from the master.
    pub version: Option<String>,
    /// What did not go as planned.
    pub notes: Vec<String>,
}

/// Runs `plan` with Locust in the point directory `dir`'s `locust` subdirectory and merges the records.
/// Err: Locust not provisioned, a file that cannot be written, a process that cannot start, records that
/// do not merge.
pub fn run(plan: &LocustPlan<'_>, dir: &Path) -> Result<LocustRun, String> {
    let python = locust_python()?;
    let ld = dir.join(LOCUST_DIR);
    std::fs::create_dir_all(&ld).map_err(|e| format!("{}: {e}", ld.display()))?;
    let ld = std::fs::canonicalize(&ld).map_err(|e| format!("{}: {e}", ld.display()))?;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(ld.join(name), bytes)
            .map_err(|e| format!("{}: {e}", ld.join(name).display()))
    };
    write(LOCUSTFILE_NAME, LOCUSTFILE.as_bytes())?;
    let (host, port) = split_addr(&plan.target.addr)?;
    let bodies: Vec<String> = plan
        .bodies
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    let plan_json = serde_json::json!({
        "schema": PLAN_SCHEMA,
        "host": host,
        "port": port,
        "host_header": plan.target.host,
        "path": format!("{}/v1/chat/completions", plan.target.prefix),
        "bodies": bodies,
        "warmup": plan.warmup,
        "users": plan.concurrency,
        "deadline_s": plan.deadline.map(|d| d.as_secs_f64()),
        "timeout_s": plan.timeout.as_secs_f64(),
        "out": ld,
    });
    write(
        "locust-plan.json",
        &serde_json::to_vec_pretty(&plan_json).unwrap_or_default(),
    )?;
    let (bind_host, bind_port) = match &plan.spec.master_bind {
        Some(b) => split_addr(b)?,
        None => {
            let p = crate::io::port::free_port("127.0.0.1")
                .map_err(|e| format!("no free port for the Locust master: {e}"))?;
            ("127.0.0.1".to_string(), p)
        }
    };
    let workers = plan.spec.workers + plan.spec.remote_workers;
    // The wall: every request's deadline and timeout, plus Locust's start and stop.
    let wall = plan.deadline.unwrap_or(Duration::from_secs(3600))
        + plan.timeout * 2
        + Duration::from_secs(60);
    let lf = ld.join(LOCUSTFILE_NAME);
    let master_args = vec![
        "-m".to_string(),
        "locust".into(),
        "-f".into(),
        lf.display().to_string(),
        "--master".into(),
        "--headless".into(),
        "--only-summary".into(),
        "--users".into(),
        plan.concurrency.to_string(),
        "--spawn-rate".into(),
        (plan.concurrency.max(1) * 50).to_string(),
        "--expect-workers".into(),
        workers.to_string(),
        "--expect-workers-max-wait".into(),
        WORKERS_WAIT_S.to_string(),
        "--master-bind-host".into(),
        bind_host.clone(),
        "--master-bind-port".into(),
        bind_port.to_string(),
        "--run-time".into(),
        format!("{}s", wall.as_secs()),
        "--sg-plan".into(),
        ld.join("locust-plan.json").display().to_string(),
    ];
    let mut master = spawn(&python, &master_args, &ld.join("master.log"), None, plan)?;
    let pgid = master.id();
    let watchdog = crate::io::serve::watch_group(pgid);
    if !crate::io::signals::register(pgid, Duration::from_secs(2)) {
        crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
        let _ = master.wait();
        return Err("interrupted before Locust could run".into());
    }
    let reach = match bind_host.as_str() {
        "0.0.0.0" | "*" | "" => "127.0.0.1".to_string(),
        "::" => "::1".to_string(),
        h => h.to_string(),
    };
    let mut children = Vec::new();
    let mut notes = Vec::new();
    for k in 0..plan.spec.workers {
        let args = vec![
            "-m".to_string(),
            "locust".into(),
            "-f".into(),
            lf.display().to_string(),
            "--worker".into(),
            "--master-host".into(),
            reach.clone(),
            "--master-port".into(),
            bind_port.to_string(),
        ];
        match spawn(
            &python,
            &args,
            &ld.join(format!("worker-{k}.log")),
            Some(pgid),
            plan,
        ) {
            Ok(c) => children.push(c),
            Err(e) => notes.push(format!("locust worker {k}: {e}")),
        }
    }
    let started = Instant::now();
    let status = loop {
        match master.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None)
                if started.elapsed() >= wall || crate::io::signals::interrupted().is_some() =>
            {
                break None
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                notes.push(format!("waiting for the Locust master: {e}"));
                break None;
            }
        }
    };
    crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
    let _ = master.wait();
    for c in &mut children {
        let _ = c.wait();
    }
    drop(watchdog);
    crate::io::signals::deregister(pgid);
    end_notes(&ld, plan, status, wall, &mut notes);
    collect(&ld, plan.warmup, plan.bodies.len(), notes)
}

/// The notes of a Locust run's end, into `notes`: workers that never joined (first: the point's VOID names
/// the first note), counted from `master.log` with the wait ([`rec::workers_not_joined`]), then a master that
/// failed (`status` its exit, None when it was stopped after `wall`).
fn end_notes(
    ld: &Path,
    plan: &LocustPlan<'_>,
    status: Option<std::process::ExitStatus>,
    wall: Duration,
    notes: &mut Vec<String>,
) {
    // Workers that never joined: said first (the point's VOID names the first note), counted, with the wait.
    let master_log = std::fs::read_to_string(ld.join("master.log")).unwrap_or_default();
    if let Some(joined) = rec::workers_not_joined(&master_log) {
        notes.insert(
            0,
            format!(
                "{} (see {}/master.log)",
                rec::workers_not_joined_note(
                    joined,
                    plan.spec.workers as usize,
                    plan.spec.remote_workers as usize,
                    WORKERS_WAIT_S
                ),
                ld.display()
            ),
        );
    }
    match status {
        Some(s) if s.success() => {}
        Some(s) => notes.push(format!(
            "the Locust master exited with {s} (see {}/master.log)",
            ld.display()
        )),
        None => notes.push(format!(
            "the Locust master did not finish within {} s and was stopped (see {}/master.log)",
            wall.as_secs(),
            ld.display()
        )),
    }
}

/// Reads `worker-<k>.jsonl` (k from 0 while they exist) and `master.json` in `ld` and merges them (a plan
/// of `total` requests, `warmup` of them first).
pub fn collect(
    ld: &Path,
    warmup: usize,
    total: usize,
    mut notes: Vec<String>,
) -> Result<LocustRun, String> {
    let mut files = Vec::new();
    for k in 0.. {
        let p = ld.join(format!("worker-{k}.jsonl"));
        if !p.exists() {
            break;
        }
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        files.push(rec::parse_worker_file(&text, &p.display().to_string())?);
    }
    let master: Option<serde_json::Value> = std::fs::read(ld.join("master.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let version = master
        .as_ref()
        .and_then(|m| m.get("locust_version"))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    if master.is_none() {
        notes.push("the Locust master wrote no master.json: its run did not end as planned".into());
    }
    let merge = rec::merge(&files, warmup, total)?;
    Ok(LocustRun {
        merge,
        version,
        notes,
    })
}

/// `host:port` split (an IPv6 `[::1]:p` loses its brackets).
fn split_addr(addr: &str) -> Result<(String, u16), String> {
    let (h, p) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("{addr:?} is not host:port"))?;
    let port = p
        .parse::<u16>()
        .map_err(|_| format!("{addr:?}: the port is not a number 0-65535"))?;
    Ok((
        h.trim_start_matches('[').trim_end_matches(']').to_string(),
        port,
    ))
}

/// Starts one Locust process: in group `group` (None: a group of its own), killed if the runner dies,
/// its output to `log`; the API key (if any) in its environment, never on its command line.
fn spawn(
    python: &Path,
    args: &[String],
    log: &Path,
    group: Option<u32>,
    plan: &LocustPlan<'_>,
) -> Result<Child, String> {
    let mut cmd = Command::new(python);
    cmd.args(args).env("PYTHONDONTWRITEBYTECODE", "1");
    crate::io::tool::logged_in_group(&mut cmd, log, group.unwrap_or(0) as i32)?;
    if let Some(k) = &plan.target.api_key {
        cmd.env("SERVEGATE_LOCUST_API_KEY", k);
    }
    cmd.spawn()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))
}
