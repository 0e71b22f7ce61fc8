//! The scripted serve's process: start-up, the accept loop (a thread per connection), the built-in routes,
//! playing a reply's [`Step`]s on time, crashes, SIGTERM and the parent watchdog.

use super::*;
use crate::replay::pace;

/// Where the scripted serve listens and the `--var` pairs its `{var:NAME}` expand to (the binary's
/// `servegate scripted-serve` flags).
#[derive(Debug, Clone, Default)]
pub struct Listen {
    /// Address to listen on.
    pub host: String,
    /// Port to listen on (0 picks a free one; the script's `start.bind_port` overrides it).
    pub port: u16,
    /// `NAME=VALUE` pairs, for the script's `{var:NAME}`.
    pub vars: Vec<(String, String)>,
}

/// The `--var NAME=VALUE` arguments, split at the first `=`; an argument without `=` is refused.
pub fn var_pairs(vars: &[String]) -> Result<Vec<(String, String)>, String> {
    vars.iter()
        .map(|v| {
            v.split_once('=')
                .map(|(n, x)| (n.to_string(), x.to_string()))
                .ok_or_else(|| format!("--var {v:?}: expected NAME=VALUE"))
        })
        .collect()
}

/// The serve's state, shared by the connection threads.
struct State {
    script: Script,
    host: String,
    port: u16,
    /// `--var` pairs.
    vars: Vec<(String, String)>,
    /// `/health` answers 200 from this instant on; `None`: never.
    ready_at: Option<Instant>,
    requests: AtomicU64,
    chats: AtomicU64,
    chats_done: AtomicU64,
    first_ready: AtomicBool,
    print: Mutex<()>,
    /// Held while a chat reply plays when the script has one slot.
    slot: Mutex<()>,
}

impl State {
    fn vars(&self, req: &http::Request, n: u64) -> Vars {
        Vars {
            host: self.host.clone(),
            port: self.port,
            n,
            chat: 0,
            method: req.method.clone(),
            path: req.path.clone(),
            status: 0,
            headers: req.headers.clone(),
            vars: self.vars.clone(),
        }
    }

    fn emit(&self, lines: &[LogLine], vars: &Vars) {
        if lines.is_empty() {
            return;
        }
        let _g = self.print.lock().unwrap_or_else(|e| e.into_inner());
        emit_raw(lines, vars);
    }

    fn model(&self) -> &str {
        self.script
            .models
            .first()
            .map(String::as_str)
            .unwrap_or("fake")
    }

    fn ready(&self) -> bool {
        self.ready_at.map(|t| Instant::now() >= t).unwrap_or(false)
    }
}

/// Writes `lines` raw (templated, `{byte:XX}` made raw) to their streams, flushed: the script's text, byte
/// for byte.
fn emit_raw(lines: &[LogLine], vars: &Vars) {
    for l in lines {
        let mut text = raw_bytes(vars.expand(&l.text).as_bytes());
        text.push(b'\n');
        let _ = match l.to {
            To::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(&text).and_then(|_| o.flush())
            }
            To::Stderr => {
                let mut e = std::io::stderr().lock();
                e.write_all(&text).and_then(|_| e.flush())
            }
        };
    }
}

/// Ends the process as `how` says (stdout flushed first).
fn crash(how: Crash) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    match how {
        Crash::Code(c) => std::process::exit(c),
        Crash::Signal(s) => {
            // SAFETY: restoring a signal's default action and raising it ends this process as that signal
            // would; nothing else is touched.
            unsafe {
                libc::signal(s, libc::SIG_DFL);
                libc::raise(s);
            }
            std::process::exit(128 + s)
        }
    }
}

/// Writes `text` to `path` atomically (a temp file beside it, then a rename).
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

fn stamp(path: &Path, word: &str) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{word} {} {t:.6}", std::process::id());
        let _ = f.sync_all();
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

/// Exits when the parent process goes away (this process is re-parented), polling every 100 ms.
fn watch_parent() {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let _ = std::thread::Builder::new()
        .name("scripted-watchdog".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY: as above.
            if unsafe { libc::getppid() } != parent {
                std::process::exit(0);
            }
        });
}

/// SIGTERM as the script says; the `stop` stamp when `times_file` is set.
fn install_term(script: &Script) {
    let times = script.times_file.clone();
    match (&script.term, &times) {
        (Term::Ignore, _) => {
            // SAFETY: ignoring SIGTERM changes only this process's disposition of it.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
            }
        }
        (Term::Default, None) => {}
        (term, _) => {
            let term = term.clone();
            let Ok(mut signals) =
                signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM])
            else {
                return;
            };
            let _ = std::thread::Builder::new()
                .name("scripted-term".into())
                .spawn(move || {
                    if signals.forever().next().is_some() {
                        if let Some(t) = &times {
                            stamp(t, "stop");
                        }
                        match term {
                            Term::Exit { code, log } => {
                                emit_raw(&log, &Vars::default());
                                crash(Crash::Code(code));
                            }
                            Term::Crash { how, log } => {
                                emit_raw(&log, &Vars::default());
                                crash(how);
                            }
                            _ => crash(Crash::Signal(libc::SIGTERM)),
                        }
                    }
                });
        }
    }
}

/// [`super::Cost`]'s memory: a forked child holding `child_alloc_mib` (forked first, before this process
/// holds its own), then `alloc_mib` held here until exit, every byte written.
fn hold_memory(cost: &super::Cost) {
    if cost.child_alloc_mib > 0 {
        // SAFETY: the child calls only async-signal-safe functions (prctl, signal, mmap, memset, pause) and
        // never returns into Rust code.
        unsafe {
            if libc::fork() == 0 {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                let len = (cost.child_alloc_mib as usize) << 20;
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p != libc::MAP_FAILED {
                    libc::memset(p, 1, len);
                }
                loop {
                    libc::pause();
                }
            }
        }
    }
    if cost.alloc_mib > 0 {
        let held: &'static mut [u8] =
            Box::leak(vec![1u8; (cost.alloc_mib as usize) << 20].into_boxed_slice());
        std::hint::black_box(held);
    }
}

/// Burns `ms` of CPU on the one worker thread ([`super::Cost::burn_on_worker`]), started at the first call, and
/// waits for it.
fn burn_on_worker(ms: f64) {
    use std::sync::mpsc;
    /// A burn of so many ms, and where to say it is done.
    type Job = (f64, mpsc::Sender<()>);
    static WORKER: std::sync::OnceLock<std::sync::Mutex<mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    let tx = WORKER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for (ms, done) in rx {
                burn_cpu(ms);
                let _ = done.send(());
            }
        });
        std::sync::Mutex::new(tx)
    });
    let (done_tx, done_rx) = mpsc::channel();
    let sent = tx
        .lock()
        .map(|t| t.send((ms, done_tx)).is_ok())
        .unwrap_or(false);
    if sent {
        let _ = done_rx.recv();
    }
}

/// Burns `ms` of this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) in a busy loop.
fn burn_cpu(ms: f64) {
    if ms <= 0.0 {
        return;
    }
    let now = || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 * 1000.0 + t.tv_nsec as f64 / 1e6
    };
    let until = now() + ms;
    let mut x = 0u64;
    while now() < until {
        for i in 0..1000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
}

fn spawn_child(spec: &ChildSpec) {
    let sh = if spec.ignore_term {
        "trap '' TERM; exec sleep 300"
    } else {
        "exec sleep 300"
    };
    match std::process::Command::new("sh")
        .args(["-c", sh])
        .stdin(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => {
            if let Some(p) = &spec.pid_file {
                write_atomic(p, &child.id().to_string());
            }
            emit_raw(
                &[LogLine::err(format!("fork: grandchild pid {}", child.id()))],
                &Vars::default(),
            );
        }
        Err(e) => emit_raw(
            &[LogLine::err(format!(
                "scripted-serve: cannot spawn the child: {e}"
            ))],
            &Vars::default(),
        ),
    }
}

/// The script of `--script FILE` (JSON, or TOML when the name ends in `.toml`) or `--script-json JSON`,
/// validated; the error is the usage message.
pub fn load(script: Option<&Path>, script_json: Option<&str>) -> Result<Script, String> {
    let script = match (script, script_json) {
        (_, Some(j)) => serde_json::from_str(j).map_err(|e| format!("--script-json: {e}"))?,
        (Some(p), None) => {
            let text =
                std::fs::read_to_string(p).map_err(|e| format!("--script {}: {e}", p.display()))?;
            Script::parse(&text, p).map_err(|e| format!("--script {}: {e}", p.display()))?
        }
        (None, None) => return Err("give --script FILE or --script-json JSON".into()),
    };
    script.validate()?;
    Ok(script)
}

/// `servegate scripted-serve`: plays `script` (see the module doc of [`super`]) on `listen`. Returns the
/// exit code when it stops on its own (a failed bind); a scripted exit ends the process directly.
pub fn serve(script: Script, listen: &Listen) -> i32 {
    let (args, arg_vars) = (listen, listen.vars.clone());
    hold_memory(&script.cost);
    pace::tighten_timer_slack();
    if !script.outlive_parent {
        watch_parent();
    }
    install_term(&script);
    if let Some(p) = &script.pid_file {
        write_atomic(p, &std::process::id().to_string());
    }
    if let Some(c) = &script.child {
        spawn_child(c);
    }
    let port = script.start.bind_port.unwrap_or(args.port);
    let start_vars = Vars {
        host: args.host.clone(),
        port,
        vars: arg_vars.clone(),
        ..Default::default()
    };
    emit_raw(&script.start.log, &start_vars);
    std::thread::sleep(ms(script.start.listen_delay_ms));
    let listener = match TcpListener::bind((args.host.as_str(), port)) {
        Ok(l) => l,
        Err(e) => {
            emit_raw(&script.start.bind_fail_log, &start_vars);
            if script.start.bind_fail_log.is_empty() {
                crate::io::printer::Printer::std().errln(&format!(
                    "scripted-serve: cannot listen on {}:{port}: {e}",
                    args.host
                ));
            }
            return script.start.bind_fail_exit.unwrap_or(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    let vars = Vars { port, ..start_vars };
    if let Some(t) = &script.times_file {
        stamp(t, "start");
    }
    emit_raw(&script.start.listening_log, &vars);
    let ready_at =
        (!script.health.never).then(|| Instant::now() + ms(script.health.ready_after_ms));
    if let Some(at) = ready_at {
        let lines = script.health.ready_log.clone();
        if !lines.is_empty() {
            let v = vars.clone();
            let _ = std::thread::Builder::new()
                .name("scripted-ready".into())
                .spawn(move || {
                    pace::sleep_until(at);
                    emit_raw(&lines, &v);
                });
        }
    }
    let state = Arc::new(State {
        script,
        host: args.host.clone(),
        port,
        vars: arg_vars,
        ready_at,
        requests: AtomicU64::new(0),
        chats: AtomicU64::new(0),
        chats_done: AtomicU64::new(0),
        first_ready: AtomicBool::new(false),
        print: Mutex::new(()),
        slot: Mutex::new(()),
    });
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let state = Arc::clone(&state);
        let _ = std::thread::Builder::new()
            .name("scripted-conn".into())
            .spawn(move || handle(&state, stream));
    }
}

/// Serves one connection: requests in order until the client closes or the reply closes.
fn handle(state: &State, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    loop {
        match http::read_request(&mut reader, &mut writer) {
            Ok(req) => {
                if !respond(state, &req, &mut writer) {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(http::ReadError::Closed) => return,
            Err(http::ReadError::Refused(status, msg)) => {
                let _ = writer.write_all(&http::json_response(
                    status,
                    &http::error_body(status, "invalid_request_error", &msg),
                    true,
                ));
                let _ = writer.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

/// Answers one request; false when the connection must close.
fn respond(state: &State, req: &http::Request, w: &mut TcpStream) -> bool {
    let n = state.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let mut vars = state.vars(req, n);
    let script = &state.script;
    let json = "application/json";
    let route = script
        .routes
        .iter()
        .find(|r| r.path == req.path && r.method.as_deref().is_none_or(|m| m == req.method));
    let (status, bytes, after): (u16, Vec<u8>, Option<Crash>) = if let Some(r) = route {
        pace::sleep_until(req.arrived + ms(r.delay_ms));
        vars.status = r.status;
        let mut headers = r.headers.clone();
        if !headers
            .iter()
            .any(|(h, _)| h.eq_ignore_ascii_case("content-type"))
        {
            headers.push(("content-type".into(), json.into()));
        }
        let headers: Vec<(String, String)> = headers
            .into_iter()
            .map(|(h, v)| (h, vars.expand(&v)))
            .collect();
        let body = vars.expand(&r.body).into_bytes();
        let mut out = raw_bytes(&http::head(
            r.status,
            &headers,
            http::Framing::Length(body.len()),
            req.close,
        ));
        out.extend_from_slice(&body);
        (r.status, out, None)
    } else {
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health" | "/v1/health") => health(state, req),
            ("GET", "/v1/models" | "/models") => {
                let data: Vec<serde_json::Value> = script
                    .models
                    .iter()
                    .map(|id| serde_json::json!({"id": id, "object": "model", "created": 1700000000, "owned_by": "llamacpp"}))
                    .collect();
                let body = serde_json::json!({"object": "list", "data": data});
                (200, http::json_response(200, &body, req.close), None)
            }
            ("GET", "/version") if script.version.is_some() => {
                let body = serde_json::json!({"version": script.version});
                (200, http::json_response(200, &body, req.close), None)
            }
            ("GET", "/props") if script.props.is_some() => {
                let body = script.props.clone().unwrap_or_default();
                (200, http::json_response(200, &body, req.close), None)
            }
            ("GET", "/metrics") if script.metrics.is_some() => {
                let body = script.metrics.clone().unwrap_or_default();
                let ct = "text/plain; version=0.0.4";
                (200, simple(200, ct, body.as_bytes(), req.close), None)
            }
            (
                "POST",
                "/v1/chat/completions"
                | "/chat/completions"
                | "/v1/completions"
                | "/v1/embeddings"
                | "/v1/responses",
            ) => {
                return chat(state, req, w, vars);
            }
            _ => (404, simple(404, json, &not_found(), req.close), None),
        }
    };
    let ok = w.write_all(&bytes).is_ok();
    vars.status = status;
    state.emit(&script.request_log, &vars);
    if let Some(how) = after {
        let _ = w.flush();
        state.emit(&script.health.exit_log, &vars);
        crash(how);
    }
    ok && !req.close
}

/// `/health`: 503 until ready, then 200; the exit after the first 200 when scripted.
fn health(state: &State, req: &http::Request) -> (u16, Vec<u8>, Option<Crash>) {
    if !state.ready() {
        let body = serde_json::json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}});
        return (503, http::json_response(503, &body, req.close), None);
    }
    let bytes = http::json_response(200, &serde_json::json!({"status": "ok"}), req.close);
    let h = &state.script.health;
    let mut after = None;
    if let Some(delay) = h.exit_after_ready_ms {
        if !state.first_ready.swap(true, Ordering::SeqCst) {
            if delay <= 0.0 {
                after = Some(Crash::Code(h.exit_code));
            } else {
                let (lines, code) = (h.exit_log.clone(), h.exit_code);
                let _ = std::thread::Builder::new()
                    .name("scripted-exit".into())
                    .spawn(move || {
                        std::thread::sleep(ms(delay));
                        emit_raw(&lines, &Vars::default());
                        crash(Crash::Code(code));
                    });
            }
        }
    }
    (200, bytes, after)
}

/// A chat request: the scripted reply, played on time; the process crash after it when scripted.
fn chat(state: &State, req: &http::Request, w: &mut TcpStream, mut vars: Vars) -> bool {
    let script = &state.script;
    let k = state.chats.fetch_add(1, Ordering::SeqCst);
    let reply = script.reply_for(k as usize);
    if script.cost.burn_on_worker {
        burn_on_worker(script.cost.cpu_ms_per_chat);
    } else {
        burn_cpu(script.cost.cpu_ms_per_chat);
    }
    // The reply's schedule starts when the burn ends, as decode follows prefill.
    let burnt = (script.cost.cpu_ms_per_chat > 0.0).then(Instant::now);
    vars.chat = k + 1;
    vars.status = reply.status;
    state.emit(&reply.log, &vars);
    let expected = reply.expect_bearer.clone().or_else(|| {
        reply.expect_bearer_file.as_ref().map(|p| {
            std::fs::read_to_string(p)
                .map(|k| k.trim().to_string())
                .unwrap_or_default()
        })
    });
    if let Some(key) = expected {
        if req.header("authorization") != Some(format!("Bearer {key}").as_str()) {
            let body = serde_json::json!({"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}});
            let ok = w
                .write_all(&http::json_response(401, &body, req.close))
                .is_ok();
            vars.status = 401;
            state.emit(&script.request_log, &vars);
            return ok && !req.close;
        }
    }
    let stream = serde_json::from_slice::<serde_json::Value>(&req.body)
        .ok()
        .and_then(|b| b.get("stream").and_then(|s| s.as_bool()))
        .unwrap_or(false);
    let steps = render_reply(reply, stream, state.model(), &vars);
    let slot = script
        .one_slot
        .then(|| state.slot.lock().unwrap_or_else(|e| e.into_inner()));
    // Timed from the moment the slot is taken: a request that waited for it starts then.
    let t0 = if slot.is_some() {
        Instant::now().max(req.arrived)
    } else {
        req.arrived
    };
    let t0 = burnt.map_or(t0, |b| t0.max(b));
    let finish = reply.on_drop == Some(OnDrop::Finish);
    let keep = play(
        &steps,
        w,
        t0,
        finish,
        || state.emit(&reply.drop_log, &vars),
        || state.emit(&script.crash_log, &vars),
    );
    drop(slot);
    if keep.is_none() {
        if let Some(OnDrop::Crash(how)) = reply.on_drop {
            crash(how);
        }
    }
    state.emit(&script.request_log, &vars);
    if let Some(c) = script.crash_after_requests {
        let done = state.chats_done.fetch_add(1, Ordering::SeqCst) + 1;
        if done >= c.requests {
            let _ = w.flush();
            state.emit(&script.crash_log, &vars);
            crash(c.how);
        }
    }
    keep.unwrap_or(false) && !req.close
}

/// Writes `steps` from `t0`; `Some(true)` when the response ended whole on a connection that stays open,
/// `Some(false)` when it must close, `None` when a write failed (the client dropped the reply: `dropped` is
/// called once then; with `finish`, the rest of the writes are timed out as if written, writing nothing);
/// `last_words` runs right before a scripted crash.
fn play(
    steps: &[Step],
    w: &mut TcpStream,
    t0: Instant,
    finish: bool,
    dropped: impl FnOnce(),
    last_words: impl FnOnce(),
) -> Option<bool> {
    let mut dropped = Some(dropped);
    for s in steps {
        match s {
            Step::Write(at, bytes) => {
                pace::sleep_until(t0 + ms(*at));
                if dropped.is_none() {
                    continue;
                }
                if w.write_all(bytes).and_then(|_| w.flush()).is_err() {
                    if let Some(f) = dropped.take() {
                        f();
                    }
                    if !finish {
                        return None;
                    }
                }
            }
            Step::End if dropped.is_none() => return None,
            Step::End => return Some(true),
            Step::Close => {
                let _ = w.shutdown(Shutdown::Both);
                return Some(false);
            }
            Step::Stall => {
                hold_until_gone(w);
                return Some(false);
            }
            Step::Crash(how) => {
                let _ = w.flush();
                last_words();
                crash(*how);
            }
            Step::Forever(every, bytes) => {
                while w.write_all(bytes).is_ok() {
                    if *every > 0.0 {
                        let _ = w.flush();
                        std::thread::sleep(ms(*every));
                    }
                }
                return None;
            }
        }
    }
    dropped.is_some().then_some(true)
}

/// Holds the connection (writing nothing) until the peer closes it, at most an hour.
fn hold_until_gone(w: &mut TcpStream) {
    let _ = w.set_read_timeout(Some(Duration::from_millis(100)));
    let until = Instant::now() + Duration::from_secs(3600);
    let mut b = [0u8; 1];
    while Instant::now() < until {
        match w.peek(&mut b) {
            Ok(0) => return,
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}
