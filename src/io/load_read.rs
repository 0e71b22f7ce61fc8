//! The load client's read path, below both of the ways it drives its requests (its own event loop,
//! [`crate::io::load_loop`], and the tokio path of [`crate::io::load_client::SingleClient`] and of open
//! loops on several CPUs): where a request goes ([`Target`]) and its head, the kernel's receive stamps and
//! how a read is placed on the monotonic clock ([`stamp`], [`arrival`]), the response reader that turns
//! reads into the evidence's timed reads ([`ResponseReader`], de-chunking with [`Dechunk`]), and the
//! thread's wake-up pacing ([`Coalesce`]). One copy of each, so every driver keeps exactly the same
//! evidence. The module doc of [`crate::io::load_client`] says what a read's time is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::io::exchange::{Exchange, ResponseMeta, BODY_CAP_BYTES};
use crate::io::reads::TimedRead;
use servegate_core::io::exchange::SendTiming;

/// The shortest time between two wake-ups of the client thread while data keeps arriving: after a
/// wake-up whose wait for data was shorter than this, the thread sleeps until this long after that
/// wake-up (never past the next scheduled send) before it looks again. The reads' times are the kernel's
/// receive times, so each read's last byte is still timed exactly; segments that arrive during the pause
/// are merged by the kernel into one carrying the last one's stamp, so within a pause (at most this long)
/// their own arrivals are not kept (each read's `recv_ms` shows the pause). [`crate::io::load_client::SingleClient`] does not
/// pause.
pub const COALESCE: Duration = Duration::from_millis(1);

/// One request of a load run: its timing and what the serve sent.
#[derive(Debug, Clone)]
pub struct LoadExchange {
    /// Send timing.
    pub timing: SendTiming,
    /// Status, headers, timed reads.
    pub exchange: Exchange,
}

/// Where requests go: `http://host[:port][/prefix]` (no TLS).
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port` to connect to.
    pub addr: String,
    /// `Host` header value.
    pub host: String,
    /// What comes before `/v1/chat/completions` in the request target (`""`, or the base URL's path such
    /// as `/openai`, kept as written), so a request goes where `{base_url}/v1/chat/completions` names.
    pub prefix: String,
    /// `Authorization: Bearer` value, if any (never recorded).
    pub api_key: Option<String>,
}

impl Target {
    /// Parses `http://host[:port][/prefix]` (port 80 when none is given). Errors say what is wrong
    /// (https is not supported by this client; an API key that is not a valid header value is refused).
    pub fn parse(base_url: &str, api_key: Option<String>) -> Result<Target, String> {
        let rest = base_url.strip_prefix("http://").ok_or_else(|| {
            format!("the load client speaks plain http:// only, got {base_url:?}")
        })?;
        let rest = rest.trim_end_matches('/');
        let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (hostport, prefix) = rest.split_at(cut);
        if hostport.is_empty() || hostport.contains('@') {
            return Err(format!(
                "a base URL is http://host[:port][/path], got {base_url:?}"
            ));
        }
        let prefix = if prefix.starts_with('/') || prefix.is_empty() {
            prefix.to_string()
        } else {
            format!("/{prefix}")
        };
        if let Some(k) = &api_key {
            if k.bytes().any(|b| b.is_ascii_control() || b >= 0x80) {
                return Err("the API key is not a valid header value".into());
            }
        }
        let addr = if hostport
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            hostport.to_string()
        } else {
            format!("{hostport}:80")
        };
        Ok(Target {
            addr,
            host: hostport.to_string(),
            prefix,
            api_key,
        })
    }
}

/// How a request that did not end within `timeout` is worded, `kept` body bytes read.
pub(crate) fn timed_out(timeout: Duration, kept: u64) -> String {
    format!(
        "timeout: the body did not end within {:.1} s of the request (request.timeout_s); {kept} bytes kept",
        timeout.as_secs_f64()
    )
}

impl ResponseReader {
    /// The request ended now, with `result` (an error is kept unless the head already gave one): its
    /// exchange (`end_ms` from the send) and its end.
    pub(crate) fn finish(self, result: Result<(), String>) -> (Exchange, Instant) {
        let mut meta = self.meta;
        if let Err(e) = result {
            meta.transport_error.get_or_insert(e);
        }
        let end = Instant::now();
        meta.end_ms = Some(end.duration_since(self.t0).as_secs_f64() * 1000.0);
        (
            Exchange {
                response: meta,
                reads: self.reads,
                body_bytes: self.kept,
                body_truncated: self.truncated,
            },
            end,
        )
    }
}

/// How long a connect may take before the request fails (`connect failed: ...`), within the request's
/// own timeout.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The request head for `body` to `target` (HTTP/1.1, `Connection: close`, the API key if any).
pub(crate) fn request_head(target: &Target, body_len: usize) -> String {
    let mut req = format!(
        "POST {}/v1/chat/completions HTTP/1.1\r\nHost: {}\r\nUser-Agent: servegate/{}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        target.prefix,
        target.host,
        env!("CARGO_PKG_VERSION"),
        body_len
    );
    if let Some(k) = &target.api_key {
        req.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    req.push_str("\r\n");
    req
}

/// One response as it is read: the head (status, headers, `head_ms`), then the body de-chunked into
/// [`TimedRead`]s, one per read that carried data, capped at [`BODY_CAP_BYTES`]. Fed read by read, by the
/// tokio path (`load_client::read_response`) and the event loop ([`crate::io::load_loop`]) alike, so both keep
/// exactly the same evidence. Times are ms from `t0`, the request's send.
pub(crate) struct ResponseReader {
    /// The request's send: reads and `head_ms` count from it.
    pub(crate) t0: Instant,
    /// The last read's arrival (reads are never stamped before it, nor before `t0`).
    pub(crate) last: Instant,
    /// The head's bytes so far (until the head is whole).
    head: Vec<u8>,
    /// None until the head is whole.
    framing: Option<Framing>,
    /// Status, headers, `head_ms`, and any transport error the head says (a redirect).
    pub(crate) meta: ResponseMeta,
    /// The body's reads.
    pub(crate) reads: Vec<TimedRead>,
    /// Body bytes kept.
    pub(crate) kept: u64,
    /// The body went past [`BODY_CAP_BYTES`].
    pub(crate) truncated: bool,
}

impl ResponseReader {
    /// A reader for a request sent at `t0` (moved by [`ResponseReader::sent`] if the send comes later).
    pub(crate) fn new(t0: Instant) -> ResponseReader {
        ResponseReader {
            t0,
            last: t0,
            head: Vec::new(),
            framing: None,
            meta: ResponseMeta::default(),
            reads: Vec::new(),
            kept: 0,
            truncated: false,
        }
    }

    /// The request was sent at `t0`.
    pub(crate) fn sent(&mut self, t0: Instant) {
        self.t0 = t0;
        self.last = t0;
    }

    /// ms from the send.
    fn ms(&self, t: Instant) -> f64 {
        t.duration_since(self.t0).as_secs_f64() * 1000.0
    }

    /// How a failed read is worded: in the head or after `kept` body bytes.
    pub(crate) fn read_error(&self, e: &std::io::Error) -> String {
        if self.framing.is_none() {
            format!("request failed: reading the response head: {e}")
        } else {
            format!("body read failed after {} bytes: {e}", self.kept)
        }
    }

    /// The serve closed the connection: whether the response was whole.
    pub(crate) fn eof(&self) -> Result<(), String> {
        match &self.framing {
            None => Err("request failed: the connection closed before a response head".into()),
            Some(Framing::UntilClose) | Some(Framing::Length(0)) => Ok(()),
            Some(Framing::Chunked(d)) if d.done => Ok(()),
            Some(_) => Err(format!(
                "body read failed after {} bytes: the connection closed before the body ended",
                self.kept
            )),
        }
    }

    /// Feeds one read of `bytes` (not empty) taken as `got` says. Returns whether the response ended
    /// (its body whole, or the cap reached). Errors: a malformed head or chunk framing.
    pub(crate) fn feed(&mut self, got: Got, bytes: &[u8]) -> Result<bool, String> {
        if self.framing.is_some() {
            return self.body(got, bytes);
        }
        self.head.extend_from_slice(bytes);
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut hs);
        let len = match resp.parse(&self.head) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if self.head.len() < 64 * 1024 => return Ok(false),
            Ok(httparse::Status::Partial) => {
                return Err("request failed: a response head over 64 KiB".into())
            }
            Err(e) => return Err(format!("request failed: a malformed response head: {e}")),
        };
        let meta = &mut self.meta;
        meta.head_ms = Some(got.at.duration_since(self.t0).as_secs_f64() * 1000.0);
        meta.status = resp.code;
        let mut framing = Framing::UntilClose;
        for h in resp.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            let v = String::from_utf8_lossy(h.value).into_owned();
            if name == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                framing = Framing::Chunked(Dechunk::default());
            } else if name == "content-length" && !matches!(framing, Framing::Chunked(_)) {
                if let Ok(l) = v.trim().parse::<u64>() {
                    framing = Framing::Length(l);
                }
            }
            meta.headers
                .entry(name)
                .and_modify(|e| {
                    e.push_str(", ");
                    e.push_str(&v)
                })
                .or_insert(v);
        }
        if (300..400).contains(&resp.code.unwrap_or(0)) {
            meta.transport_error = Some(redirect_refused(
                resp.code.unwrap_or(0),
                meta.headers.get("location").map(String::as_str),
            ));
        }
        self.framing = Some(framing);
        let rest = std::mem::take(&mut self.head).split_off(len);
        if rest.is_empty() {
            // The body comes with the next reads (or, of no bytes, ends when the serve closes).
            return Ok(false);
        }
        self.body(got, &rest)
    }

    /// One read of body bytes: one copy, the wire bytes (or, chunked, only their data) straight into the
    /// read kept.
    fn body(&mut self, got: Got, bytes: &[u8]) -> Result<bool, String> {
        // One allocation per read: the read's data is never longer than its wire bytes.
        let mut data = Vec::with_capacity(bytes.len());
        let finished = match self.framing.as_mut() {
            None | Some(Framing::UntilClose) => {
                data.extend_from_slice(bytes);
                false
            }
            Some(Framing::Length(left)) => {
                let take = (*left as usize).min(bytes.len());
                *left -= take as u64;
                data.extend_from_slice(&bytes[..take]);
                *left == 0
            }
            Some(Framing::Chunked(d)) => {
                d.feed_into(bytes, &mut data)?;
                d.done
            }
        };
        if !data.is_empty() {
            let room = BODY_CAP_BYTES.saturating_sub(self.kept) as usize;
            let over = data.len() > room;
            data.truncate(room);
            if !data.is_empty() {
                self.kept += data.len() as u64;
                self.reads.push(TimedRead {
                    recv_ms: got.stamped.then(|| self.ms(got.returned)),
                    t_ms: self.ms(got.at),
                    bytes: data,
                });
            }
            if over {
                self.truncated = true;
                return Ok(true);
            }
        }
        Ok(finished)
    }
}

/// Holds the kernel's receive timestamping on for as long as it lives. Linux stamps incoming packets
/// only while some socket asks for stamps, and it turns that on asynchronously (a deferred static key):
/// the first segments a fresh socket receives can come unstamped, and would then be timed by the read.
/// So a run first opens a loopback TCP pair that asks for stamps and sends a byte until one arrives
/// stamped (normally at once, at most ~200 ms), and keeps that pair open until it ends.
pub struct RxStamps {
    _pair: Option<(std::net::TcpStream, std::net::TcpStream)>,
    /// Whether stamps were seen before it gave up (false: reads are timed by the client's clock).
    pub on: bool,
}

impl RxStamps {
    /// Turns receive timestamps on and waits until they are (see the type's doc). Never fails: a
    /// kernel without them leaves `on` false.
    pub fn hold() -> RxStamps {
        use std::os::fd::AsRawFd;
        let pair = (|| -> std::io::Result<(std::net::TcpStream, std::net::TcpStream)> {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            let c = std::net::TcpStream::connect(l.local_addr()?)?;
            let (s, _) = l.accept()?;
            c.set_read_timeout(Some(Duration::from_millis(100)))?;
            Ok((c, s))
        })();
        let Ok((c, mut s)) = pair else {
            return RxStamps {
                _pair: None,
                on: false,
            };
        };
        set_stamping(c.as_raw_fd());
        let mut buf = [0u8; 16];
        let mut on = false;
        for _ in 0..100 {
            if std::io::Write::write_all(&mut s, b"x").is_err() {
                break;
            }
            match recvmsg_stamped(c.as_raw_fd(), &mut buf) {
                Ok((_, Some(_))) => {
                    on = true;
                    break;
                }
                Ok((0, _)) | Err(_) => break,
                Ok(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        RxStamps {
            _pair: Some((c, s)),
            on,
        }
    }
}

/// `SO_TIMESTAMPNS` on the socket `fd`, best effort (a refusal leaves its reads unstamped). Public for
/// bench-self's floor client.
pub fn set_stamping(fd: libc::c_int) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on a socket we own, reading an int we own for its stated size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// One read: when the socket is readable, `recvmsg`. What it returns of the read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Got {
    /// Bytes read (0: the peer closed).
    pub(crate) n: usize,
    /// When they arrived: the kernel's receive time of the last segment taken ([`arrival`]), no earlier
    /// than the previous read's (or the request's send) and no later than `returned`.
    pub(crate) at: Instant,
    /// When `recvmsg` returned, on the client's clock.
    pub(crate) returned: Instant,
    /// Whether `at` is the kernel's stamp (false: the kernel gave none, and `at` is `returned`).
    pub(crate) stamped: bool,
}

/// A `CLOCK_REALTIME` time as the kernel stamps a read: ns since the Unix epoch. Kept as an integer on
/// the read path, where `SystemTime` arithmetic cost each read more than the stamp's own work (two
/// checked differences, ~110 instructions of ~310, callgrind, docs/performance.md "Stop 41").
pub(crate) type RealNs = i64;

/// A read of `n` bytes that `recvmsg` just returned with the kernel's receive time `kernel`, as [`Got`]
/// says; `*last` moves to its arrival.
pub(crate) fn stamp(n: usize, kernel: Option<RealNs>, last: &mut Instant) -> Got {
    let (real, returned) = clock_pair();
    let at = arrival(kernel, real, returned);
    let stamped = kernel.is_some() && at != returned;
    let at = at.max(*last);
    *last = at;
    Got {
        n,
        at,
        returned,
        stamped,
    }
}

/// The widest gap [`clock_pair`] accepts between its two wall-clock reads, ns (20 µs).
const CLOCK_PAIR_GAP_NS: RealNs = 20_000;

/// The wall clock now (`CLOCK_REALTIME`, `clock_gettime`), ns since the Unix epoch; 0 when it cannot be
/// read (a stamp is then never believed: [`arrival`]).
fn real_ns() -> RealNs {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 {
        return 0;
    }
    timespec_ns(&ts)
}

/// A `timespec` as ns (saturating: no wall-clock time of this century comes near).
// `time_t` and `c_long` are i64 on 64-bit Linux (the conversion is then the identity) but i32 on some
// 32-bit targets.
#[allow(clippy::useless_conversion)]
fn timespec_ns(ts: &libc::timespec) -> RealNs {
    i64::from(ts.tv_sec)
        .saturating_mul(1_000_000_000)
        .saturating_add(i64::from(ts.tv_nsec))
}

/// The wall clock and the monotonic clock read together: wall, monotonic, wall again, retried (up to 8
/// times) while the two wall-clock reads are more than [`CLOCK_PAIR_GAP_NS`] apart (or went back), so a
/// thread preempted or stopped between the reads does not shift a kernel stamp it converts ([`arrival`])
/// by its pause. The conversion error is then at most that gap.
fn clock_pair() -> (RealNs, Instant) {
    let mut pair = (real_ns(), Instant::now());
    for _ in 0..8 {
        let gap = real_ns() - pair.0;
        if (0..=CLOCK_PAIR_GAP_NS).contains(&gap) {
            break;
        }
        pair = (real_ns(), Instant::now());
    }
    pair
}

/// A kernel receive time (`CLOCK_REALTIME`, ns) on the monotonic clock: `now_mono` minus how long ago it
/// was by `now_real` (the two clocks read together, so a wall-clock step between reads does not move
/// it). A stamp in the future reads as now; one over 60 s old, or none, is not believed: now.
pub(crate) fn arrival(kernel: Option<RealNs>, now_real: RealNs, now_mono: Instant) -> Instant {
    match kernel.map(|k| now_real - k) {
        Some(age) if (0..=60_000_000_000).contains(&age) => now_mono
            .checked_sub(Duration::from_nanos(age as u64))
            .unwrap_or(now_mono),
        _ => now_mono,
    }
}

/// `recvmsg` into `buf` with room for the `SCM_TIMESTAMPNS` control message. Returns the bytes read and
/// the kernel's receive time (`CLOCK_REALTIME`) when it gave one. Errors are the syscall's (`WouldBlock`
/// on a drained non-blocking socket). Public for bench-self's floor client, which reads the same way.
pub fn recvmsg_stamped(
    fd: libc::c_int,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<SystemTime>)> {
    let (n, stamp) = recvmsg_stamped_ns(fd, buf)?;
    let at = |ns: RealNs| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns as u64);
    Ok((n, stamp.map(at)))
}

/// [`recvmsg_stamped`] with the kernel's receive time as [`RealNs`] (what the client's reads convert).
pub(crate) fn recvmsg_stamped_ns(
    fd: libc::c_int,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<RealNs>)> {
    // Room for one timespec control message, aligned for cmsghdr.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; every pointer set below points into buffers that outlive the
    // call, with their lengths.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: fd is an open socket; msg describes buffers we own.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }

    let mut stamp = None;
    // SAFETY: CMSG_FIRSTHDR/NXTHDR walk the control buffer the kernel filled, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                if ts.tv_sec > 0 {
                    stamp = Some(timespec_ns(&ts));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// The client thread's wake-up pacing ([`COALESCE`]), driven around each wait of the event loop
/// ([`crate::io::load_loop`]) or by a tokio runtime's park hooks (an open loop on several CPUs). Times are ns
/// from the start of the run.
pub(crate) struct Coalesce {
    start: Instant,
    quantum_ns: u64,
    /// When the thread last woke.
    woke_ns: AtomicU64,
    /// When it last began waiting for data (after any coalescing sleep).
    parked_ns: AtomicU64,
    /// The wait before the last wake-up was shorter than the quantum: data is arriving fast.
    busy: std::sync::atomic::AtomicBool,
    /// The next scheduled send (open loop), ns; u64::MAX when none.
    next_send_ns: AtomicU64,
    /// Times the thread woke from waiting (its waits for sockets), for the benchmark's account.
    wakeups: AtomicU64,
}

impl Coalesce {
    pub(crate) fn new(start: Instant, quantum: Duration) -> Coalesce {
        Coalesce {
            start,
            quantum_ns: quantum.as_nanos() as u64,
            woke_ns: AtomicU64::new(0),
            parked_ns: AtomicU64::new(0),
            busy: std::sync::atomic::AtomicBool::new(false),
            next_send_ns: AtomicU64::new(u64::MAX),
            wakeups: AtomicU64::new(0),
        }
    }

    /// Times the thread woke from waiting so far (each unpark of its runtime).
    pub(crate) fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The open-loop dispatcher's next send time: no coalescing sleep runs past it.
    pub(crate) fn next_send(&self, at: Instant) {
        let ns = at.saturating_duration_since(self.start).as_nanos() as u64;
        self.next_send_ns.store(ns, Ordering::Relaxed);
    }

    /// No send is scheduled any more (the open loop sent its last): coalescing runs unbounded by one.
    pub(crate) fn no_next_send(&self) {
        self.next_send_ns.store(u64::MAX, Ordering::Relaxed);
    }

    pub(crate) fn before_park(&self) {
        let pause = coalescing_pause(
            self.busy.load(Ordering::Relaxed),
            self.woke_ns.load(Ordering::Relaxed),
            self.quantum_ns,
            self.next_send_ns.load(Ordering::Relaxed),
            self.now_ns(),
        );
        if pause > 0 {
            std::thread::sleep(Duration::from_nanos(pause));
        }
        self.parked_ns.store(self.now_ns(), Ordering::Relaxed);
    }

    pub(crate) fn after_unpark(&self) {
        let now = self.now_ns();
        let waited = now.saturating_sub(self.parked_ns.load(Ordering::Relaxed));
        self.busy.store(waited < self.quantum_ns, Ordering::Relaxed);
        self.woke_ns.store(now, Ordering::Relaxed);
        self.wakeups.fetch_add(1, Ordering::Relaxed);
    }
}

/// How long the client thread pauses before it waits for data again, ns (all times ns from the run's
/// start): nothing unless the last wait was shorter than the quantum (`busy`: data arriving fast); then
/// until `quantum` after the last wake-up, but never past the next scheduled send.
fn coalescing_pause(busy: bool, woke: u64, quantum: u64, next_send: u64, now: u64) -> u64 {
    if quantum == 0 || !busy {
        return 0;
    }
    woke.saturating_add(quantum)
        .min(next_send)
        .saturating_sub(now)
}

enum Framing {
    UntilClose,
    Length(u64),
    Chunked(Dechunk),
}

/// An incremental `Transfer-Encoding: chunked` decoder (RFC 9112 §7.1): sizes with optional extensions,
/// data, CRLF; the last (zero) chunk and trailers end it.
#[derive(Debug, Default)]
pub(crate) struct Dechunk {
    state: DState,
    line: Vec<u8>,
    left: usize,
    /// The terminating chunk and its trailers were read.
    pub done: bool,
}

#[derive(Debug, Default, PartialEq)]
enum DState {
    #[default]
    Size,
    Data,
    DataEnd,
    Trailer,
}

impl Dechunk {
    /// Feeds wire bytes, appending the data bytes they carry to `out`. Errors on a malformed size line.
    pub(crate) fn feed_into(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let mut i = 0;
        while i < input.len() && !self.done {
            match self.state {
                DState::Size | DState::DataEnd | DState::Trailer => {
                    // The line's end found in one pass over the input; a line cut by the end of a
                    // read is kept until the next brings its end.
                    let rest = &input[i..];
                    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                        self.line.extend_from_slice(rest);
                        if self.line.len() > 4096 {
                            return Err("body read failed: a chunk-size line over 4 KiB".into());
                        }
                        return Ok(());
                    };
                    i += nl + 1;
                    let whole: &[u8] = if self.line.is_empty() {
                        &rest[..nl]
                    } else {
                        self.line.extend_from_slice(&rest[..nl]);
                        &self.line
                    };
                    if whole.len() > 4096 {
                        return Err("body read failed: a chunk-size line over 4 KiB".into());
                    }
                    // The line is parsed where it lies (in the read, or in the buffer that held its
                    // start) and then cleared, the buffer kept: two lines per chunk (the size, the
                    // data's CRLF), and a chunk per token on a stream.
                    let line = whole.strip_suffix(b"\r").unwrap_or(whole);
                    match self.state {
                        DState::Size => {
                            let size = chunk_size(line).ok_or_else(|| {
                                format!(
                                    "body read failed: a malformed chunk size {:?}",
                                    String::from_utf8_lossy(line)
                                )
                            })?;
                            if size == 0 {
                                self.state = DState::Trailer;
                            } else {
                                self.left = size;
                                self.state = DState::Data;
                            }
                        }
                        DState::DataEnd => self.state = DState::Size,
                        DState::Trailer => {
                            if line.is_empty() {
                                self.done = true;
                            }
                        }
                        DState::Data => {}
                    }
                    self.line.clear();
                }
                DState::Data => {
                    let take = self.left.min(input.len() - i);
                    out.extend_from_slice(&input[i..i + take]);
                    i += take;
                    self.left -= take;
                    if self.left == 0 {
                        self.state = DState::DataEnd;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The size of a chunk-size line (`1a`, `1A;ext=1`, ` 1a `: hex digits before any `;`, blanks around
/// them; RFC 9112 §7.1 `chunk-size = 1*HEXDIG`), none when it is not one (no digit, a byte that is not a
/// hex digit, or past `usize`). Parsed digit by digit where it lies: one line per token on a stream.
fn chunk_size(line: &[u8]) -> Option<usize> {
    let hex = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or(b"")
        .trim_ascii();
    if hex.is_empty() {
        return None;
    }
    hex.iter().try_fold(0usize, |n, &b| {
        let d = (b as char).to_digit(16)?;
        n.checked_mul(16)?.checked_add(d as usize)
    })
}

/// The transport error of a reply that redirects (HTTP `code`, 3xx): servegate follows no redirect, so the
/// reply is refused naming where it pointed (`location`, the header's value, when there is one).
pub(crate) fn redirect_refused(code: u16, location: Option<&str>) -> String {
    let to = location.map(|l| format!(" to {l}")).unwrap_or_default();
    format!("redirect refused: HTTP {code}{to}; servegate follows no redirect (point serve.url at the serve itself)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunk_across_reads_keeps_only_data() {
        let wire = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
        for split in 0..wire.len() {
            let mut d = Dechunk::default();
            let mut out = Vec::new();
            d.feed_into(&wire[..split], &mut out).unwrap();
            d.feed_into(&wire[split..], &mut out).unwrap();
            assert_eq!(out, b"hello world", "split at {split}");
            assert!(d.done);
        }
        let mut d = Dechunk::default();
        let err = d.feed_into(b"zz\r\n", &mut Vec::new()).unwrap_err();
        assert!(err.contains("malformed chunk size \"zz\""), "{err}");
        // Many chunks fed one byte at a time: every line is read afresh (none left over from the last).
        let mut d = Dechunk::default();
        let mut out = Vec::new();
        for b in b"1\r\na\r\n2;x=y\r\nbc\r\n 1 \r\nd\r\n0\r\nT: v\r\n\r\n" {
            d.feed_into(&[*b], &mut out).unwrap();
        }
        assert_eq!((out.as_slice(), d.done), (&b"abcd"[..], true));
        assert_eq!(chunk_size(b"1A;ext=1"), Some(26));
        assert_eq!(chunk_size(b" 00ff "), Some(255));
        assert_eq!(chunk_size(b"ffffffff"), Some(0xffff_ffff));
        assert_eq!(chunk_size(b""), None);
        assert_eq!(chunk_size(b" ;x"), None);
        assert_eq!(chunk_size(b"\xff"), None);
        assert_eq!(chunk_size(b"+1a"), None, "a sign is not a HEXDIG");
        assert_eq!(chunk_size(b"1 a"), None);
        assert_eq!(chunk_size(b"10000000000000000"), None, "past usize");
    }

    #[test]
    fn the_client_pauses_only_while_data_arrives_fast_and_never_past_a_send() {
        let q = 1_000_000; // 1 ms
                           // A wait longer than the quantum (a token every 12 ms): wait for the next at once.
        assert_eq!(
            coalescing_pause(false, 5_000_000, q, u64::MAX, 5_040_000),
            0
        );
        // Data arriving fast: pause until a quantum after the wake-up.
        assert_eq!(
            coalescing_pause(true, 5_000_000, q, u64::MAX, 5_040_000),
            960_000
        );
        // ... but not past the next scheduled send.
        assert_eq!(
            coalescing_pause(true, 5_000_000, q, 5_500_000, 5_040_000),
            460_000
        );
        // A quantum already over, a send already due, or coalescing off: no pause.
        assert_eq!(coalescing_pause(true, 5_000_000, q, u64::MAX, 6_100_000), 0);
        assert_eq!(
            coalescing_pause(true, 5_000_000, q, 5_000_000, 5_040_000),
            0
        );
        assert_eq!(coalescing_pause(true, 5_000_000, 0, u64::MAX, 5_040_000), 0);
    }

    #[test]
    fn a_kernel_receive_time_is_placed_on_the_monotonic_clock() {
        let mono = Instant::now() + Duration::from_secs(100);
        let real: RealNs = 1_800_000_000 * 1_000_000_000;
        // Received 2.5 ms before the clocks were read: 2.5 ms before `mono`.
        let k = real - 2_500_000;
        assert_eq!(
            arrival(Some(k), real, mono),
            mono - Duration::from_micros(2500)
        );
        // A stamp of the very moment of the read, or 60 s old: still the kernel's.
        assert_eq!(arrival(Some(real), real, mono), mono);
        assert_eq!(
            arrival(Some(real - 60_000_000_000), real, mono),
            mono - Duration::from_secs(60)
        );
        // No stamp, a stamp in the future (a wall-clock step), or one over 60 s old: the read's own time.
        assert_eq!(arrival(None, real, mono), mono);
        assert_eq!(arrival(Some(real + 5_000_000), real, mono), mono);
        assert_eq!(arrival(Some(real - 61_000_000_000), real, mono), mono);
        // The wall clock read here and a kernel stamp's conversion agree on the unit (ns since the epoch).
        let now = real_ns();
        let sys = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        assert!((sys - now).abs() < 60_000_000_000, "{sys} {now}");
        let ts = libc::timespec {
            tv_sec: 3,
            tv_nsec: 5,
        };
        assert_eq!(timespec_ns(&ts), 3_000_000_005);
    }

    #[test]
    fn target_is_plain_http_host_port() {
        let t = Target::parse("http://127.0.0.1:8080", None).unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080");
        assert_eq!(t.prefix, "");
        assert!(Target::parse("https://x:1", None).is_err());
        let p = Target::parse("http://x:1/openai/", None).unwrap();
        assert_eq!((p.addr.as_str(), p.prefix.as_str()), ("x:1", "/openai"));
        assert_eq!(Target::parse("http://x", None).unwrap().addr, "x:80");
        assert!(Target::parse("http://u@x:1", None).is_err());
        assert!(Target::parse("http://x:1", Some("a\r\nX: y".into())).is_err());
    }
}
