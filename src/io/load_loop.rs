//! The load client's event loop: one thread, one `epoll` set (through mio, edge-triggered), every request
//! of the thread a small state machine (connect, write the request, read the head, read the body), the
//! way the bare floor client of `cargo xtask bench-self --only load` reads (`xtask/src/bench_floor.rs`).
//! No task per request, no wakers, no reactor between the socket and the read: when `epoll_wait` says a
//! socket is ready, its request reads it at once.
//!
//! What a request records is what [`crate::io::load_client::one`] records, through the same code: the
//! request is sent just before the write of its bytes (after the connect); each read is `recvmsg` into the
//! thread's one buffer, stamped with the kernel's receive time ([`crate::io::load_read::stamp`]) and fed
//! to the same [`ResponseReader`] (head, de-chunking, the body cap); a read that does not fill the buffer
//! takes all there was (edge-triggered: the next arrival is reported anew), except once the serve has
//! closed, when the socket is read to its end. `timeout` bounds each request from its start (connect
//! included), [`CONNECT_TIMEOUT`] its connect; the nearest of those times and of the open loop's next due
//! send is the wait's timeout (`epoll_wait` rounds up to the millisecond, as tokio's timer does). The
//! thread wakes under the same rule as before ([`Coalesce`], driven around each wait as the runtime's park
//! hooks drove it).
//!
//! The schedule ([`Feed`]): a closed loop's slots each send their next request as soon as the previous one
//! ended (from one shared counter, so several threads can share a schedule); an open loop sends request i
//! when it is due and a slot of the cap is free. Timings are recorded exactly as the tokio path records
//! them ([`SendTiming`]: intended, woke, slot, sent, end).

use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::io::load_read::{
    recvmsg_stamped_ns, request_head, set_stamping, stamp, timed_out, Coalesce, LoadExchange,
    ResponseReader, Target, CONNECT_TIMEOUT,
};
use servegate_core::io::exchange::{RuntimeTag, SendTiming};

/// Bytes asked of each read (the thread's one buffer).
const READ_BUF_BYTES: usize = 64 * 1024;

/// The most timed reads a request's list is made for up front ([`Loop::reads_hint`]): 48 KiB of
/// `TimedRead`s, so one long reply does not make every later request reserve its length.
const READS_HINT_MAX: usize = 1024;

/// What one thread's loop runs, and against what.
pub(crate) struct Plan<'a> {
    /// Where requests go.
    pub(crate) target: &'a Target,
    /// Request i's JSON body is `bodies[i]`.
    pub(crate) bodies: &'a [Vec<u8>],
    /// The run's start: every `SendTiming` field is ms from it.
    pub(crate) start: Instant,
    /// No request starts at or after this.
    pub(crate) stop_at: Option<Instant>,
    /// Each request ends by this long after its start.
    pub(crate) timeout: Duration,
    /// This thread's wake-up pacing (and its count of wake-ups).
    pub(crate) pace: &'a Coalesce,
    /// The runtime each record names (None: the one-thread client).
    pub(crate) runtime: Option<RuntimeTag>,
}

/// How this thread's requests are scheduled.
pub(crate) enum Feed<'a> {
    /// Closed loop: one slot per entry, each sending first its given request (None: the next of the
    /// counter) and then the counter's next as soon as its previous request ended.
    Closed {
        firsts: Vec<Option<usize>>,
        next: &'a AtomicUsize,
    },
    /// Open loop: request i is due at `due_ms[i]` (ms from the start, non-decreasing), at most `cap` in
    /// flight.
    Open { due_ms: &'a [f64], cap: usize },
}

/// Runs `feed` against `plan`'s target on the calling thread until every request it starts has ended.
/// Returns one record per request started, in the order they ended. Errors: the event loop could not be
/// made or waited on (a request's own failure is recorded in its exchange).
pub(crate) fn drive(plan: &Plan, feed: Feed) -> Result<Vec<LoadExchange>, String> {
    let poll =
        Poll::new().map_err(|e| format!("cannot start the load client's event loop: {e}"))?;
    let addrs = plan
        .target
        .addr
        .to_socket_addrs()
        .map(|a| a.collect::<Vec<_>>())
        .map_err(|e| format!("connect failed: {e}"))
        .and_then(|a| {
            if a.is_empty() {
                Err("connect failed: could not resolve to any address".to_string())
            } else {
                Ok(a)
            }
        });
    let now = Instant::now();
    let (claims, open) = match feed {
        Feed::Closed { firsts, next } => (
            firsts.into_iter().map(|f| (f, now)).collect(),
            Sched::Closed(next),
        ),
        Feed::Open { due_ms, cap } => (
            VecDeque::new(),
            Sched::Open(OpenLoop {
                due_ms,
                cap: cap.max(1),
                cursor: 0,
                woke: None,
                last_slot: plan.start,
            }),
        ),
    };
    let mut lp = Loop {
        plan,
        poll,
        addrs,
        conns: Vec::new(),
        free: Vec::new(),
        live: 0,
        bound: None,
        buf: vec![0; READ_BUF_BYTES],
        reads_hint: 0,
        done: Vec::new(),
        claims,
        sched: open,
    };
    lp.run()?;
    Ok(lp.done)
}

/// The open loop's state: the next request to send, and when the loop first saw it due.
struct OpenLoop<'a> {
    due_ms: &'a [f64],
    cap: usize,
    cursor: usize,
    /// When the loop woke for the request at `cursor` (it may then wait for a slot).
    woke: Option<Instant>,
    /// When the last request got its slot.
    last_slot: Instant,
}

enum Sched<'a> {
    Closed(&'a AtomicUsize),
    Open(OpenLoop<'a>),
}

/// When and why a request started (its [`SendTiming`] but the send and the end).
struct Started {
    index: usize,
    intended_ms: f64,
    woke: Instant,
    slot: Instant,
}

enum Stage {
    /// Connecting to the address at `at`; `wire` is the request to write.
    Connecting { at: usize, wire: Vec<u8> },
    /// Writing `wire` from `off`.
    Writing { wire: Vec<u8>, off: usize },
    /// Reading the response.
    Reading,
}

struct Conn {
    started: Started,
    sock: TcpStream,
    stage: Stage,
    reader: ResponseReader,
    /// The serve closed its side: read to the end, even past a short read.
    closing: bool,
    /// The request's end by its timeout.
    deadline: Instant,
    /// The connect's end by [`CONNECT_TIMEOUT`].
    connect_by: Instant,
}

struct Loop<'a, 'p> {
    plan: &'p Plan<'a>,
    poll: Poll,
    addrs: Result<Vec<SocketAddr>, String>,
    /// Requests in flight, by token.
    conns: Vec<Option<Conn>>,
    /// Tokens free for reuse.
    free: Vec<usize>,
    live: usize,
    /// No request's deadline (nor, while it connects, its connect's) comes before this: the earliest
    /// of them when last computed, lowered as requests start, never raised but by a scan ([`Loop::expire`]).
    /// A request that ended leaves it early, which costs at most one wake-up that finds nothing due.
    bound: Option<Instant>,
    buf: Vec<u8>,
    /// Timed reads of the last response that ended (at most [`READS_HINT_MAX`]): the next request's
    /// list of reads is made this long up front, where growing it read by read copied it five times
    /// over a 64-token reply.
    reads_hint: usize,
    done: Vec<LoadExchange>,
    /// Closed loop: slots to send their next request (the first to send, if given; when the slot freed).
    claims: VecDeque<(Option<usize>, Instant)>,
    sched: Sched<'a>,
}

impl Loop<'_, '_> {
    fn ms(&self, t: Instant) -> f64 {
        t.duration_since(self.plan.start).as_secs_f64() * 1000.0
    }

    fn run(&mut self) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        loop {
            self.refill();
            if self.live == 0 && self.exhausted() {
                return Ok(());
            }
            let mut wait = self.wait();
            let parks = wait != Some(Duration::ZERO);
            if parks {
                self.plan.pace.before_park();
                wait = self.wait();
            }
            let polled = self.poll.poll(&mut events, wait);
            if parks {
                self.plan.pace.after_unpark();
            }
            match polled {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("the load client's event loop failed: {e}")),
            }
            for ev in events.iter() {
                let closing = ev.is_read_closed() || ev.is_error();
                let readable = ev.is_readable() || closing;
                self.handle(ev.token().0, readable, closing);
            }
            self.expire(Instant::now());
        }
    }

    /// Nothing more will be started.
    fn exhausted(&self) -> bool {
        match &self.sched {
            Sched::Closed(_) => self.claims.is_empty(),
            Sched::Open(o) => o.cursor >= self.open_len(o),
        }
    }

    fn open_len(&self, o: &OpenLoop) -> usize {
        o.due_ms.len().min(self.plan.bodies.len())
    }

    /// Starts what may start now: closed, each freed slot's next request; open, every request due while
    /// a slot is free.
    fn refill(&mut self) {
        let n = self.plan.bodies.len();
        if let Sched::Closed(next) = self.sched {
            while let Some((first, freed)) = self.claims.pop_front() {
                let i = first.unwrap_or_else(|| next.fetch_add(1, Ordering::Relaxed));
                if i >= n || self.plan.stop_at.is_some_and(|s| Instant::now() >= s) {
                    continue; // the slot retires
                }
                let woke = Instant::now();
                let intended_ms = self.ms(freed);
                self.start(Started {
                    index: i,
                    intended_ms,
                    woke,
                    slot: woke,
                });
            }
            return;
        }
        loop {
            let Sched::Open(o) = &mut self.sched else {
                return;
            };
            let len = o.due_ms.len().min(n);
            if o.cursor >= len {
                self.plan.pace.no_next_send();
                return;
            }
            let due = o.due_ms[o.cursor];
            let due_at = self.plan.start + Duration::from_secs_f64(due.max(0.0) / 1000.0);
            if self.plan.stop_at.is_some_and(|s| due_at >= s) {
                o.cursor = len;
                continue;
            }
            self.plan.pace.next_send(due_at);
            let now = Instant::now();
            if now < due_at {
                return;
            }
            // A loop that was waiting for a slot past this request's due time was not behind its
            // schedule: the request waited in the queue from its due time (queue, not lag).
            let last_slot = o.last_slot;
            let woke = *o
                .woke
                .get_or_insert(if last_slot > due_at { due_at } else { now });
            if self.live >= o.cap {
                return;
            }
            let slot = Instant::now();
            o.last_slot = slot;
            o.woke = None;
            let index = o.cursor;
            o.cursor += 1;
            self.start(Started {
                index,
                intended_ms: due,
                woke,
                slot,
            });
        }
    }

    /// How long to wait for sockets: until the nearest request or connect deadline (its lower bound,
    /// [`Loop::bound`]), or the open loop's next due send (when a slot is free for it).
    fn wait(&self) -> Option<Duration> {
        let mut until = self.bound;
        if let Sched::Open(o) = &self.sched {
            if o.cursor < self.open_len(o) && self.live < o.cap {
                let due = o.due_ms[o.cursor];
                let at = self.plan.start + Duration::from_secs_f64(due.max(0.0) / 1000.0);
                until = Some(until.map_or(at, |u| u.min(at)));
            }
        }
        until.map(|u| u.saturating_duration_since(Instant::now()))
    }

    /// Starts one request: connects (the request's time starts now) and keeps it in flight, or records
    /// it failed.
    fn start(&mut self, started: Started) {
        let begun = Instant::now();
        let plan = self.plan;
        let body = &plan.bodies[started.index];
        let mut wire = request_head(plan.target, body.len()).into_bytes();
        wire.extend_from_slice(body);
        let token = self.free.pop().unwrap_or(self.conns.len());
        let mut reader = ResponseReader::new(begun);
        reader.reads.reserve_exact(self.reads_hint);
        match connect_from(&self.addrs, 0, &self.poll, token) {
            Ok((sock, at)) => {
                let conn = Conn {
                    started,
                    sock,
                    stage: Stage::Connecting { at, wire },
                    reader,
                    closing: false,
                    deadline: begun + plan.timeout,
                    connect_by: begun + CONNECT_TIMEOUT,
                };
                let due = conn.deadline.min(conn.connect_by);
                self.bound = Some(self.bound.map_or(due, |b| b.min(due)));
                if token == self.conns.len() {
                    self.conns.push(Some(conn));
                } else {
                    self.conns[token] = Some(conn);
                }
                self.live += 1;
            }
            Err(e) => {
                self.free.push(token);
                self.record(started, reader, Err(e));
            }
        }
    }

    /// One readiness event of the request at `token`.
    fn handle(&mut self, token: usize, readable: bool, closing: bool) {
        let Some(conn) = self.conns.get_mut(token).and_then(|c| c.as_mut()) else {
            return;
        };
        conn.closing |= closing;
        let mut read_now = readable;
        if let Stage::Connecting { at, wire } = &mut conn.stage {
            match connect_state(&conn.sock) {
                Ok(false) => return,
                Ok(true) => {
                    let _ = conn.sock.set_nodelay(true);
                    set_stamping(conn.sock.as_raw_fd());
                    // The request is sent now: what the serve takes to answer counts from here, not
                    // from the connect.
                    conn.reader.sent(Instant::now());
                    conn.stage = Stage::Writing {
                        wire: std::mem::take(wire),
                        off: 0,
                    };
                    read_now = false; // nothing can have come before the request
                }
                Err(e) => {
                    // The next address, if any (as a connect to a name tries each of its addresses).
                    let next = *at + 1;
                    let wire = std::mem::take(wire);
                    match connect_from(&self.addrs, next, &self.poll, token) {
                        Ok((sock, at)) => {
                            conn.sock = sock;
                            conn.stage = Stage::Connecting { at, wire };
                            conn.closing = false;
                        }
                        Err(later) => {
                            let err = if next < self.addrs.as_ref().map_or(0, |a| a.len()) {
                                later
                            } else {
                                format!("connect failed: {e}")
                            };
                            self.end(token, Err(err));
                        }
                    }
                    return;
                }
            }
        }
        if let Stage::Writing { wire, off } = &mut conn.stage {
            let first = *off == 0;
            match write_some(&conn.sock, wire, off) {
                Ok(false) => return,
                Ok(true) => {
                    conn.stage = Stage::Reading;
                    // A write that had to wait may have let the response's first edge pass unread.
                    read_now |= !first;
                }
                Err(e) => {
                    self.end(token, Err(format!("request failed: {e}")));
                    return;
                }
            }
        }
        if !read_now && !conn.closing {
            return;
        }
        let fd = conn.sock.as_raw_fd();
        if let Some(result) = read_ready(fd, &mut self.buf, &mut conn.reader, conn.closing) {
            self.end(token, result);
        }
    }

    /// Ends every request past its deadline (or its connect's), and makes [`Loop::bound`] exact again.
    /// Nothing to do before the bound: no request is due then (one scan per bound passed, not per wake-up).
    fn expire(&mut self, now: Instant) {
        match self.bound {
            Some(b) if now >= b => {}
            _ => return,
        }
        let mut bound: Option<Instant> = None;
        for token in 0..self.conns.len() {
            let Some(c) = &self.conns[token] else {
                continue;
            };
            let connecting = matches!(c.stage, Stage::Connecting { .. });
            if now >= c.deadline {
                let e = timed_out(self.plan.timeout, c.reader.kept);
                self.end(token, Err(e));
            } else if connecting && now >= c.connect_by {
                let e = format!(
                    "connect failed: no connection to {} within {} s",
                    self.plan.target.addr,
                    CONNECT_TIMEOUT.as_secs()
                );
                self.end(token, Err(e));
            } else {
                let t = if connecting {
                    c.deadline.min(c.connect_by)
                } else {
                    c.deadline
                };
                bound = Some(bound.map_or(t, |b| b.min(t)));
            }
        }
        self.bound = bound;
    }

    /// Ends the request at `token` with `result` (closing its socket, which leaves the epoll set).
    fn end(&mut self, token: usize, result: Result<(), String>) {
        let Some(conn) = self.conns[token].take() else {
            return;
        };
        self.free.push(token);
        self.live -= 1;
        drop(conn.sock); // closing the socket takes it out of the epoll set
        self.record(conn.started, conn.reader, result);
    }

    /// Keeps a request's record; a closed loop's slot then sends its next.
    fn record(&mut self, started: Started, reader: ResponseReader, result: Result<(), String>) {
        let sent = reader.t0;
        self.reads_hint = reader.reads.len().min(READS_HINT_MAX);
        let (exchange, end) = reader.finish(result);
        self.done.push(LoadExchange {
            timing: SendTiming {
                index: started.index,
                intended_ms: started.intended_ms,
                woke_ms: self.ms(started.woke),
                slot_ms: self.ms(started.slot),
                sent_ms: self.ms(sent),
                end_ms: self.ms(end),
                runtime: self.plan.runtime,
            },
            exchange,
        });
        if matches!(self.sched, Sched::Closed(_)) {
            self.claims.push_back((None, Instant::now()));
        }
    }
}

/// A non-blocking connect to the first address from `at` on that can be begun, registered at `token`.
/// Returns the socket and its address's position. Errors: no address could be tried (the last reason).
fn connect_from(
    addrs: &Result<Vec<SocketAddr>, String>,
    at: usize,
    poll: &Poll,
    token: usize,
) -> Result<(TcpStream, usize), String> {
    let addrs = addrs.as_ref().map_err(|e| e.clone())?;
    let mut last = None;
    for (k, addr) in addrs.iter().enumerate().skip(at) {
        match TcpStream::connect(*addr) {
            Ok(mut sock) => {
                let interest = Interest::READABLE | Interest::WRITABLE;
                match poll.registry().register(&mut sock, Token(token), interest) {
                    Ok(()) => return Ok((sock, k)),
                    Err(e) => last = Some(e),
                }
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => format!("connect failed: {e}"),
        None => "connect failed: could not resolve to any address".into(),
    })
}

/// Whether a non-blocking connect has completed (false: not yet). Errors: it failed.
fn connect_state(sock: &TcpStream) -> std::io::Result<bool> {
    if let Some(e) = sock.take_error()? {
        return Err(e);
    }
    match sock.peer_addr() {
        Ok(_) => Ok(true),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotConnected
                || e.raw_os_error() == Some(libc::EINPROGRESS) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Writes `wire` from `*off` until it is all written (true) or the socket is full (false).
fn write_some(sock: &TcpStream, wire: &[u8], off: &mut usize) -> std::io::Result<bool> {
    use std::io::Write;
    let mut sock = sock;
    while *off < wire.len() {
        match sock.write(&wire[*off..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => *off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Reads what socket `fd` holds into `buf`, each read stamped and fed to `r`, until a short read (all
/// there was; unless `closing`: then to the end). Returns the request's end when it ended (the response
/// whole, the serve closed, or an error), None while it goes on.
fn read_ready(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
    r: &mut ResponseReader,
    closing: bool,
) -> Option<Result<(), String>> {
    loop {
        match recvmsg_stamped_ns(fd, buf) {
            Ok((0, _)) => return Some(r.eof()),
            Ok((n, kernel)) => {
                let got = stamp(n, kernel, &mut r.last);
                match r.feed(got, &buf[..n]) {
                    Err(e) => return Some(Err(e)),
                    Ok(true) => return Some(Ok(())),
                    Ok(false) if n < buf.len() && !closing => return None,
                    Ok(false) => {}
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Some(Err(r.read_error(&e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::load_read::COALESCE;
    use std::io::{Read, Write};

    /// A serve on loopback (127.0.0.1 only) that answers `n` connections one after the other, each once
    /// its request's JSON body has come (it ends in `}`), with a chunked reply written in two parts.
    fn serve(n: usize) -> (u16, std::thread::JoinHandle<()>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            for _ in 0..n {
                let (mut s, _) = l.accept().unwrap();
                let mut req = Vec::new();
                let mut b = [0u8; 4096];
                while req.last() != Some(&b'}') {
                    let k = s.read(&mut b).unwrap();
                    assert!(k > 0, "the client closed before its body");
                    req.extend_from_slice(&b[..k]);
                }
                let head = String::from_utf8_lossy(&req).to_string();
                assert!(
                    head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
                    "{head}"
                );
                s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
                    .unwrap();
                s.flush().unwrap();
                s.write_all(b"6\r\n world\r\n0\r\n\r\n").unwrap();
            }
        });
        (port, h)
    }

    fn bodies(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{{\"i\":{i}}}").into_bytes())
            .collect()
    }

    fn run(
        target: &Target,
        bodies: &[Vec<u8>],
        feed: Feed,
        timeout: Duration,
    ) -> Vec<LoadExchange> {
        let start = Instant::now();
        let pace = Coalesce::new(start, COALESCE);
        let plan = Plan {
            target,
            bodies,
            start,
            stop_at: None,
            timeout,
            pace: &pace,
            runtime: None,
        };
        let mut out = drive(&plan, feed).unwrap();
        out.sort_by_key(|x| x.timing.index);
        out
    }

    fn text(x: &LoadExchange) -> String {
        let bytes: Vec<u8> = x
            .exchange
            .reads
            .iter()
            .flat_map(|r| r.bytes.clone())
            .collect();
        String::from_utf8(bytes).unwrap()
    }

    /// A closed loop of 2 slots sends all 3 requests, each read whole and de-chunked, timed in order;
    /// `localhost` reaches a serve on 127.0.0.1 whichever of its addresses comes first.
    #[test]
    fn a_closed_loop_reads_every_reply_whole() {
        let (port, serve) = serve(3);
        let target = Target::parse(&format!("http://localhost:{port}"), None).unwrap();
        let bodies = bodies(3);
        let next = AtomicUsize::new(0);
        let feed = Feed::Closed {
            firsts: vec![None, None],
            next: &next,
        };
        let out = run(&target, &bodies, feed, Duration::from_secs(30));
        serve.join().unwrap();
        assert_eq!(out.len(), 3);
        for (i, x) in out.iter().enumerate() {
            let r = &x.exchange.response;
            assert_eq!(x.timing.index, i);
            assert_eq!((r.status, r.transport_error.as_deref()), (Some(200), None));
            assert_eq!(text(x), "hello world");
            assert_eq!(x.exchange.body_bytes, 11);
            let t = &x.timing;
            assert!(t.intended_ms <= t.woke_ms && t.woke_ms <= t.sent_ms && t.sent_ms <= t.end_ms);
            assert!(x.exchange.reads.iter().all(|rd| rd.t_ms >= 0.0));
        }
    }

    /// An open loop capped at one in flight: requests due together wait in the queue from their due
    /// time (woke at 0, not lag) and each gets its slot only when the one before it ended.
    #[test]
    fn an_open_loop_queues_due_requests_for_a_slot() {
        let (port, serve) = serve(3);
        let target = Target::parse(&format!("http://127.0.0.1:{port}"), None).unwrap();
        let bodies = bodies(3);
        let due = [0.0, 0.0, 0.0];
        let feed = Feed::Open {
            due_ms: &due,
            cap: 1,
        };
        let out = run(&target, &bodies, feed, Duration::from_secs(30));
        serve.join().unwrap();
        assert_eq!(out.len(), 3);
        for w in out.windows(2) {
            assert!(
                w[1].timing.slot_ms >= w[0].timing.end_ms,
                "{:?}",
                w[1].timing
            );
            assert_eq!(w[1].timing.woke_ms, 0.0);
        }
        assert!(out.iter().all(|x| text(x) == "hello world"));
    }

    /// A refused connect and a serve that never answers are each recorded as that request's error.
    #[test]
    fn failures_are_recorded_per_request() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let target = Target::parse(&format!("http://127.0.0.1:{port}"), None).unwrap();
        let bodies = bodies(2);
        let next = AtomicUsize::new(0);
        let feed = Feed::Closed {
            firsts: vec![None],
            next: &next,
        };
        let out = run(&target, &bodies, feed, Duration::from_secs(30));
        assert_eq!(out.len(), 2);
        for x in &out {
            let e = x.exchange.response.transport_error.as_deref().unwrap_or("");
            assert!(e.starts_with("connect failed: "), "{e}");
        }
        // Accepted by the kernel (the listener's backlog), never answered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target =
            Target::parse(&format!("http://{}", silent.local_addr().unwrap()), None).unwrap();
        let next = AtomicUsize::new(0);
        let feed = Feed::Closed {
            firsts: vec![None],
            next: &next,
        };
        let out = run(&target, &bodies[..1], feed, Duration::from_millis(200));
        let e = out[0]
            .exchange
            .response
            .transport_error
            .as_deref()
            .unwrap_or("");
        assert!(
            e.starts_with("timeout: the body did not end within 0.2 s of the request"),
            "{e}"
        );
        assert!(out[0].exchange.reads.is_empty());
    }
}
