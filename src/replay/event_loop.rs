//! The synthetic serve's event loop: every connection of `servegate replay --synthetic` on one thread (a
//! current-thread tokio runtime), so one core serves hundreds of concurrent paced streams (the load
//! client's benchmark needs 256 streams at 20,000 tok/s aggregate; one thread per connection, each
//! spinning before its writes, was the bottleneck at 6,666 tok/s).
//!
//! * **Connections**: one task each reads requests (the head parsed by [`super::http::read_request`],
//!   the `arrived` stamp taken when the request's first bytes were read) and answers health, models and
//!   refusals at once; a chat reply's [`Plan`] becomes a [`Job`] for the pacer, and once written the
//!   connection logs it ([`App::chat_done`]) and reads the next request (keep-alive) or closes.
//! * **Pacer**: one task holds every job's next write in a heap ordered by due time. It sleeps on a
//!   `timerfd` (ns resolution, `CLOCK_MONOTONIC`) to [`pace::SPIN_US`] before the earliest due write,
//!   then polls (yielding to the connections, so reads are not held up) until it is due, stamps the
//!   clock and writes (non-blocking). Each write is stamped just before it is made, as in
//!   [`super::execute`]: the timing log's `sent_ms` (the truth) is when the bytes left, not when they
//!   were due. A write the socket cannot take at once (a client not reading) is retried every
//!   millisecond without holding up the others.
//!
//! The writes of one reply (head, chunks, last chunk, abort) are those of [`super::execute`], computed
//! by [`writes_of`].

use std::collections::BinaryHeap;
use std::future::Future as _;
use std::io::{self, Write as _};
use std::net::{Shutdown, TcpListener};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::{http, pace, Answer, App, Plan, Sent};

/// Retry interval of a write the socket could not take at once, and the longest a pacer waits when a
/// reply is stuck on such a write.
const RETRY: Duration = Duration::from_millis(1);

/// How long a connection may stay silent between requests before it is closed (as the blocking serve's
/// read timeout).
const IDLE: Duration = Duration::from_secs(600);

/// One write of a reply: due `at` from the request's arrival.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Write {
    /// Due time from the request's arrival.
    pub at: Duration,
    /// The bytes (framed).
    pub bytes: Vec<u8>,
    /// This write carries the response head (its stamp is the head's send time).
    pub head: bool,
    /// The plan's send this write carries (its stamp is that send's send time).
    pub send: Option<usize>,
}

/// The writes of `plan`, in order, exactly as [`super::execute`] makes them: the head (with the first
/// send when that is due no later, and the last chunk when the body ends there), each later send framed
/// (chunked: one chunk each, the last chunk after the last send unless the reply aborts). Also returns
/// when to close the connection mid-body (`abort_at`) and whether to close after (`close` or abort). A
/// plan with status 0 has no writes.
pub(crate) fn writes_of(plan: &Plan, close: bool) -> (Vec<Write>, Option<Duration>, bool) {
    let close_after = close || plan.abort_at.is_some();
    if plan.status == 0 {
        return (Vec::new(), Some(plan.abort_at.unwrap_or_default()), true);
    }
    let framing = if plan.chunked {
        http::Framing::Chunked
    } else {
        http::Framing::Length(plan.sends.iter().map(|s| s.bytes.len()).sum())
    };
    let frame = |out: &mut Vec<u8>, bytes: &[u8]| {
        if plan.chunked {
            http::push_chunk(out, bytes)
        } else {
            out.extend_from_slice(bytes)
        }
    };
    let n = plan.sends.len();
    let ends_body = |i: usize| plan.chunked && plan.abort_at.is_none() && i + 1 == n;
    let mut head = http::head(plan.status, &plan.headers, framing, close_after);
    let mut next = 0;
    if n > 0 && plan.sends[0].at <= plan.head_at {
        frame(&mut head, &plan.sends[0].bytes);
        if ends_body(0) {
            head.extend_from_slice(http::LAST_CHUNK);
        }
        next = 1;
    } else if n == 0 && plan.chunked && plan.abort_at.is_none() {
        head.extend_from_slice(http::LAST_CHUNK);
    }
    let mut out = Vec::with_capacity(n + 1);
    out.push(Write {
        at: plan.head_at,
        bytes: head,
        head: true,
        send: (next == 1).then_some(0),
    });
    for (i, s) in plan.sends.iter().enumerate().skip(next) {
        let mut bytes = Vec::with_capacity(s.bytes.len() + 16);
        frame(&mut bytes, &s.bytes);
        if ends_body(i) {
            bytes.extend_from_slice(http::LAST_CHUNK);
        }
        out.push(Write {
            at: s.at,
            bytes,
            head: false,
            send: Some(i),
        });
    }
    (out, plan.abort_at, close_after)
}

/// One reply being written by the pacer.
#[derive(Debug)]
struct Job {
    t0: Instant,
    writes: std::vec::IntoIter<Write>,
    /// The write under way: its bytes and how many are out (a write the socket took only in part).
    partial: Option<(Vec<u8>, usize)>,
    abort_at: Option<Duration>,
    close_after: bool,
    out: Arc<std::net::TcpStream>,
    sent: Sent,
    done: Option<oneshot::Sender<Sent>>,
}

/// A job in the pacer's heap: its next write is due at `due`. Ordered earliest first, then by `id`
/// (first come, first written among equals).
#[derive(Debug)]
struct Due {
    due: Instant,
    id: u64,
    job: Box<Job>,
}

impl PartialEq for Due {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.id) == (o.due, o.id)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Due {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // BinaryHeap is a max-heap: the earliest due is the greatest.
        (o.due, o.id).cmp(&(self.due, self.id))
    }
}

impl Job {
    fn ms(&self, t: Instant) -> f64 {
        pace::ms_between(self.t0, t)
    }

    /// When this job next needs the pacer (`None`: nothing left, [`Job::finish`] it).
    fn next_due(&self) -> Option<Instant> {
        if self.partial.is_some() {
            return Some(Instant::now() + RETRY);
        }
        if self.sent.write_error.is_some() {
            // As the blocking serve: after a failed write, close at once if the reply was to abort.
            return self.abort_at.map(|_| Instant::now());
        }
        match self.writes.as_slice().first() {
            Some(w) => Some(self.t0 + w.at),
            None => self.abort_at.map(|a| self.t0 + a),
        }
    }

    /// Does the step due now: the next write (stamped just before it is made), the rest of a partial
    /// write, or the abort (the connection shut down mid-body).
    fn step(&mut self) {
        if let Some((bytes, off)) = self.partial.take() {
            return self.write_from(bytes, off);
        }
        if self.sent.write_error.is_none() {
            if let Some(w) = self.writes.next() {
                let ms = self.ms(Instant::now());
                if w.head {
                    self.sent.head_ms = Some(ms);
                }
                if let Some(slot) = w.send.and_then(|i| self.sent.sends_ms.get_mut(i)) {
                    *slot = Some(ms);
                }
                return self.write_from(w.bytes, 0);
            }
        }
        if self.abort_at.take().is_some() {
            let _ = self.out.shutdown(Shutdown::Both);
            self.sent.closed = true;
        }
    }

    /// Writes `bytes[off..]` without blocking; keeps what the socket did not take for a retry.
    fn write_from(&mut self, bytes: Vec<u8>, mut off: usize) {
        while off < bytes.len() {
            match (&*self.out).write(&bytes[off..]) {
                Ok(0) => return self.fail("write returned 0 bytes".into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.partial = Some((bytes, off));
                    return;
                }
                Err(e) => return self.fail(e.to_string()),
            }
        }
    }

    fn fail(&mut self, e: String) {
        self.sent.write_error = Some(e);
        self.sent.closed = true;
    }

    /// Ends the job: the end stamp, the close flag, the result to the connection.
    fn finish(mut self) {
        self.sent.end_ms = self.ms(Instant::now());
        self.sent.closed |= self.close_after;
        if let Some(tx) = self.done.take() {
            let _ = tx.send(std::mem::take(&mut self.sent));
        }
    }
}

/// A `timerfd` on `CLOCK_MONOTONIC` (the clock `Instant` reads), registered with the runtime: wakes at
/// an absolute instant to within the kernel's timer slack (the serve tightens it to 1 ns), unlike the
/// runtime's own timer, which counts whole milliseconds.
struct Timer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl Timer {
    fn new() -> io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create has no memory preconditions; a non-negative result is a new fd we own.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid fd just created and owned by nobody else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: an OwnedFd stays open and names the same fd until the AsyncFd (its owner) is dropped.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }
        .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Timer { fd })
    }

    fn raw(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.get_ref().as_raw_fd()
    }

    /// Reads the expiry count; true when the timer had fired.
    fn consume(&self) -> bool {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a u64 we own from our own non-blocking timerfd.
        let n = unsafe { libc::read(self.raw(), (&mut v as *mut u64).cast(), 8) };
        n == 8
    }

    /// Arms the timer for `at` (absolute), dropping an expiry not yet read.
    fn arm(&self, at: Instant) {
        self.consume();
        let ns = pace::mono_ns_of(at).max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: timerfd_settime on our own timerfd with a spec we own; the old value is not asked for.
        unsafe {
            libc::timerfd_settime(
                self.raw(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            );
        }
    }

    /// Ready once the armed time has passed.
    fn poll_fired(&self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        loop {
            match self.fd.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Ready(Ok(mut guard)) => {
                    if self.consume() {
                        return Poll::Ready(());
                    }
                    guard.clear_ready();
                }
            }
        }
    }
}

/// What ended a pacer's wait.
enum Woke {
    Job(Box<Job>),
    Closed,
    Time,
}

/// Waits for a new job (while the channel is `open`) or for `until`, whichever comes first.
async fn wait(
    rx: &mut mpsc::UnboundedReceiver<Box<Job>>,
    open: bool,
    timer: Option<&Timer>,
    until: Instant,
) -> Woke {
    let mut sleep = match timer {
        Some(t) => {
            t.arm(until);
            None
        }
        None => Some(Box::pin(tokio::time::sleep_until(until.into()))),
    };
    std::future::poll_fn(|cx| {
        if open {
            if let Poll::Ready(j) = rx.poll_recv(cx) {
                return Poll::Ready(j.map(Woke::Job).unwrap_or(Woke::Closed));
            }
        }
        let fired = match (&mut sleep, timer) {
            (Some(s), _) => s.as_mut().poll(cx).is_ready(),
            (None, Some(t)) => t.poll_fired(cx).is_ready(),
            (None, None) => true,
        };
        if fired {
            Poll::Ready(Woke::Time)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// The pacer: writes every job's writes on time (see the module doc).
async fn pacer(mut rx: mpsc::UnboundedReceiver<Box<Job>>) {
    let timer = Timer::new().ok();
    let spin = Duration::from_micros(pace::SPIN_US);
    let mut heap: BinaryHeap<Due> = BinaryHeap::new();
    let mut ids = 0u64;
    let mut push = |heap: &mut BinaryHeap<Due>, job: Box<Job>| match job.next_due() {
        Some(due) => {
            ids += 1;
            heap.push(Due { due, id: ids, job });
        }
        None => job.finish(),
    };
    let mut open = true;
    loop {
        while open {
            match rx.try_recv() {
                Ok(job) => push(&mut heap, job),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        while heap.peek().is_some_and(|d| d.due <= Instant::now()) {
            let Some(Due { mut job, .. }) = heap.pop() else {
                break;
            };
            job.step();
            push(&mut heap, job);
        }
        let Some(next) = heap.peek().map(|d| d.due) else {
            if !open {
                return;
            }
            match rx.recv().await {
                Some(job) => push(&mut heap, job),
                None => open = false,
            }
            continue;
        };
        let now = Instant::now();
        if next <= now + spin {
            // Close to due: poll, letting the connections' reads and the runtime's I/O go first.
            tokio::task::yield_now().await;
            continue;
        }
        match wait(&mut rx, open, timer.as_ref(), next - spin).await {
            Woke::Job(job) => push(&mut heap, job),
            Woke::Closed => open = false,
            Woke::Time => {}
        }
    }
}

/// Reads the next request from `stream` into `buf` (bytes of a following request stay in it). The
/// `arrived` stamp is taken when the request's first bytes were read (now, for bytes already here).
async fn next_request(
    stream: &mut tokio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Result<http::Request, http::ReadError> {
    let mut arrived = (!buf.is_empty()).then(Instant::now);
    let mut continued = false;
    let mut chunk = [0u8; 8192];
    loop {
        if arrived.is_some() {
            match complete(buf) {
                Whole::More { expect_continue } => {
                    if expect_continue && !continued {
                        continued = true;
                        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
                    }
                }
                Whole::Parse => {
                    let mut cur = io::Cursor::new(&buf[..]);
                    let mut early = Vec::new();
                    match http::read_request(&mut cur, &mut early) {
                        Err(http::ReadError::Closed) => {} // more bytes needed after all
                        r => {
                            let used = cur.position() as usize;
                            if !continued && !early.is_empty() {
                                let _ = stream.write_all(&early).await;
                            }
                            buf.drain(..used.min(buf.len()));
                            return r.map(|mut req| {
                                req.arrived = arrived.unwrap_or(req.arrived);
                                req
                            });
                        }
                    }
                }
            }
        }
        let n = match tokio::time::timeout(IDLE, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return Err(http::ReadError::Closed),
            Ok(Ok(n)) => n,
        };
        if arrived.is_none() {
            arrived = Some(Instant::now());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Whether a buffer holds a whole request.
enum Whole {
    /// Not yet: read more (and answer `Expect: 100-continue` first when the head asks).
    More { expect_continue: bool },
    /// A whole request, or one [`http::read_request`] refuses: parse it.
    Parse,
}

fn complete(buf: &[u8]) -> Whole {
    let mut slots = [httparse::EMPTY_HEADER; http::MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() <= http::MAX_HEAD_BYTES => {
            return Whole::More {
                expect_continue: false,
            }
        }
        _ => return Whole::Parse,
    };
    let mut length = 0usize;
    let mut expect = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Whole::Parse;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                Some(l) if l <= http::MAX_BODY_BYTES => length = l,
                _ => return Whole::Parse,
            }
        }
        if h.name.eq_ignore_ascii_case("expect")
            && std::str::from_utf8(h.value)
                .map(|v| v.trim().eq_ignore_ascii_case("100-continue"))
                .unwrap_or(false)
        {
            expect = true;
        }
    }
    if buf.len() >= head_len + length {
        Whole::Parse
    } else {
        Whole::More {
            expect_continue: expect && length > 0,
        }
    }
}

/// Serves one connection: requests in order until the client closes or asks to.
async fn connection(
    app: Arc<App>,
    mut stream: tokio::net::TcpStream,
    pacer: mpsc::UnboundedSender<Box<Job>>,
) {
    let _ = stream.set_nodelay(true);
    let out = {
        use std::os::fd::AsFd;
        match stream.as_fd().try_clone_to_owned() {
            Ok(fd) => Arc::new(std::net::TcpStream::from(fd)),
            Err(e) => {
                app.printer()
                    .errln(&format!("replay: cannot serve a connection: {e}"));
                return;
            }
        }
    };
    let mut buf = Vec::new();
    loop {
        let req = match next_request(&mut stream, &mut buf).await {
            Ok(r) => r,
            Err(http::ReadError::Closed) => return,
            Err(http::ReadError::Refused(status, msg)) => {
                app.printer()
                    .errln(&format!("replay: refused a request: {status} {msg}"));
                let _ = stream
                    .write_all(&http::json_response(
                        status,
                        &http::error_body(status, "invalid_request_error", &msg),
                        true,
                    ))
                    .await;
                let _ = stream.shutdown().await;
                return;
            }
        };
        match app.answer(&req) {
            Answer::Now { bytes, keep_open } => {
                if stream.write_all(&bytes).await.is_err() || !keep_open {
                    let _ = stream.shutdown().await;
                    return;
                }
            }
            Answer::Paced(chat) => {
                let (writes, abort_at, close_after) = writes_of(&chat.plan, req.close);
                let (tx, rx) = oneshot::channel();
                let job = Box::new(Job {
                    t0: req.arrived,
                    writes: writes.into_iter(),
                    partial: None,
                    abort_at,
                    close_after,
                    out: Arc::clone(&out),
                    sent: Sent {
                        sends_ms: vec![None; chat.plan.sends.len()],
                        ..Default::default()
                    },
                    done: Some(tx),
                });
                let sent = if pacer.send(job).is_ok() {
                    rx.await.ok()
                } else {
                    None
                };
                let Some(sent) = sent else {
                    app.leave();
                    return;
                };
                app.chat_done(&chat, &req, &sent);
                app.leave();
                if sent.closed {
                    let _ = stream.shutdown().await;
                    return;
                }
            }
        }
    }
}

/// Accepts connections forever on one thread (a current-thread runtime): one task per connection and
/// one pacer (see the module doc). Returns only when accepting fails.
pub(crate) fn serve(listener: TcpListener, app: Arc<App>) -> io::Result<()> {
    pace::tighten_timer_slack();
    // A longer accept queue than std's `bind` asks for (128): 256 clients connecting at once overflowed
    // it, and a dropped SYN is retried by the client 1 s later (seen as +1 s TTFTs at 256 streams). Linux
    // takes a second listen() on a listening socket as a new backlog (capped by net.core.somaxconn).
    {
        use std::os::fd::AsRawFd;
        // SAFETY: listen(2) on the listening socket we own; a failure leaves the old backlog.
        unsafe {
            libc::listen(listener.as_raw_fd(), 4096);
        }
    }
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(pacer(rx));
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(connection(Arc::clone(&app), stream, tx.clone()));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{Send, SendKind};

    fn plan(sends: &[(u64, &str)], chunked: bool, head_at: u64) -> Plan {
        Plan {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunked,
            head_at: Duration::from_millis(head_at),
            sends: sends
                .iter()
                .map(|(at, b)| Send {
                    at: Duration::from_millis(*at),
                    bytes: b.as_bytes().to_vec(),
                    tokens: 1,
                    kind: SendKind::Token,
                })
                .collect(),
            abort_at: None,
            label: "t".into(),
        }
    }

    #[test]
    fn writes_are_the_blocking_serves_head_chunks_and_last_chunk() {
        let (w, abort, close) = writes_of(&plan(&[(0, "ab"), (5, "c")], true, 0), false);
        assert_eq!((abort, close), (None, false));
        assert_eq!(w.len(), 2);
        let head = String::from_utf8(w[0].bytes.clone()).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n2\r\nab\r\n"), "{head}");
        assert!(w[0].head && w[0].send == Some(0));
        assert_eq!(
            (w[1].at, w[1].bytes.as_slice(), w[1].send),
            (
                Duration::from_millis(5),
                &b"1\r\nc\r\n0\r\n\r\n"[..],
                Some(1)
            )
        );
        // A first send due after the head is a write of its own; a plain body has a length.
        let (w, _, close) = writes_of(&plan(&[(3, "xyz")], false, 0), true);
        assert!(close);
        assert_eq!(w.len(), 2);
        let head = String::from_utf8(w[0].bytes.clone()).unwrap();
        assert!(head.contains("content-length: 3\r\n") && head.contains("connection: close"));
        assert_eq!((w[0].send, w[1].bytes.as_slice()), (None, &b"xyz"[..]));
    }

    #[test]
    fn an_aborted_reply_has_no_last_chunk_and_closes() {
        let mut p = plan(&[(0, "a"), (2, "b")], true, 0);
        p.abort_at = Some(Duration::from_millis(9));
        let (w, abort, close) = writes_of(&p, false);
        assert_eq!((abort, close), (Some(Duration::from_millis(9)), true));
        assert_eq!(w[1].bytes, b"1\r\nb\r\n");
        p.status = 0;
        let (w, abort, close) = writes_of(&p, false);
        assert!(w.is_empty() && close && abort == Some(Duration::from_millis(9)));
    }

    #[test]
    fn a_request_is_whole_with_its_content_length_body() {
        let head = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 4\r\n\r\n";
        assert!(matches!(
            complete(head),
            Whole::More {
                expect_continue: false
            }
        ));
        assert!(matches!(
            complete(&[&head[..], b"{}{}"].concat()),
            Whole::Parse
        ));
        assert!(matches!(
            complete(b"GET /health HTTP/1.1\r\n"),
            Whole::More { .. }
        ));
        assert!(matches!(
            complete(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"),
            Whole::More {
                expect_continue: true
            }
        ));
        assert!(matches!(complete(b"GARBAGE\x01\r\n\r\n"), Whole::Parse));
    }
}
