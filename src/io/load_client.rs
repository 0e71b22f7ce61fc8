//! The load client: many chat-completion requests in flight from one thread. One event loop of the
//! thread's own ([`crate::io::load_loop`]: `epoll` through mio, every request a small state machine, no
//! task per request) drives every connection; each `read()` of a response is timestamped on the thread that made it
//! (no hand-over between threads, the cost that made the blocking client 40 µs per token), and the bytes are
//! de-chunked and kept as [`crate::io::reads::TimedRead`]s exactly as [`crate::io::client`] keeps them ([`crate::io::exchange`]), so a load run's
//! evidence is judged by the same parser and measure code.
//!
//! **When a read arrived**: the kernel's receive time of the last segment the read took (`SO_TIMESTAMPNS`,
//! Linux), not the moment the client got round to the read, so a client that is busy or asleep does not
//! move the timings it records; where the kernel gives no timestamp the read's own clock is used. That is
//! what lets the client **coalesce wake-ups**: while data is arriving faster than [`COALESCE`] apart it
//! wakes at most once per [`COALESCE`] and reads every socket that is ready (each wake-up of a thread costs
//! 25-70 µs of CPU on a VM, more than the read), and a serve whose tokens come further apart than that is
//! read the moment they arrive. Several segments taken by one read carry the last one's time (the kernel
//! merges segments that queue unread into one), as a read's own clock would.
//!
//! HTTP/1.1 over plain TCP (`http://` only), one connection per request (`Connection: close`). A request
//! counts as sent just before the write of its bytes, after the connect: its reads, and so TTFT, count
//! from there. Each read also records when `recvmsg` returned (`TimedRead::recv_ms`), so how late the
//! client took a read stays in the evidence. [`SingleClient`] sends one request at a time the same way
//! (what a gate without `[load]` uses: one current-thread tokio runtime, [`one`], reading through the same
//! [`ResponseReader`] and the same stamping as the event loop). It measures nothing; per
//! request it records the schedule: the intended send time, when the client woke for it (the lag), when it
//! got a concurrency slot (the queue time) and when the request was sent.

use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use tokio::io::Interest;

use crate::io::exchange::Exchange;
pub(crate) use crate::io::load_read::Coalesce;
pub use crate::io::load_read::{
    recvmsg_stamped, set_stamping, LoadExchange, RxStamps, Target, COALESCE,
};
use crate::io::load_read::{
    recvmsg_stamped_ns, request_head, stamp, timed_out, Got, ResponseReader, CONNECT_TIMEOUT,
};

/// How send times are scheduled.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Closed loop: `concurrency` slots, each sending its next request as soon as its previous one ended.
    /// A request's intended send time is the moment its slot freed.
    Closed {
        /// Requests in flight.
        concurrency: u32,
    },
    /// Open loop: request i is due at `due_ms[i]` from the start; at most `max_concurrency` in flight (a
    /// due request waits in the client's queue for a slot).
    Open {
        /// Intended send times, ms from the start, one per request, non-decreasing.
        due_ms: Vec<f64>,
        /// Cap on requests in flight (None: no cap).
        max_concurrency: Option<u32>,
    },
}

/// The timing of one request's send (the type is the pure crate's: evidence and analysis read it).
pub use servegate_core::io::exchange::SendTiming;

/// Runs `bodies` (request i is `bodies[i]`, JSON bytes) against `target` on the given schedule, on the
/// calling thread (its own event loop, [`crate::io::load_loop`]). `deadline`: no request starts after it (from the start);
/// `timeout`: each request ends by then. Returns one [`LoadExchange`] per request started, in send order.
pub fn run(
    target: &Target,
    bodies: Vec<Vec<u8>>,
    schedule: &Schedule,
    deadline: Option<Duration>,
    timeout: Duration,
) -> Result<Vec<LoadExchange>, String> {
    run_counted(target, bodies, schedule, deadline, timeout).map(|(out, _)| out)
}

/// [`run`], also returning how many times the client thread woke from waiting (its event loop's waits):
/// bench-self's account of the client's CPU beside the floor client's wake-ups. Not evidence.
pub fn run_counted(
    target: &Target,
    bodies: Vec<Vec<u8>>,
    schedule: &Schedule,
    deadline: Option<Duration>,
    timeout: Duration,
) -> Result<(Vec<LoadExchange>, u64), String> {
    let _stamps = RxStamps::hold();
    let start = Instant::now();
    let pace = Coalesce::new(start, COALESCE);
    let plan = crate::io::load_loop::Plan {
        target,
        bodies: &bodies,
        start,
        stop_at: deadline.map(|d| start + d),
        timeout,
        pace: &pace,
        runtime: None,
    };
    let next = AtomicUsize::new(0);
    let feed = match schedule {
        Schedule::Closed { concurrency } => crate::io::load_loop::Feed::Closed {
            firsts: vec![None; *concurrency as usize],
            next: &next,
        },
        Schedule::Open {
            due_ms,
            max_concurrency,
        } => crate::io::load_loop::Feed::Open {
            due_ms,
            cap: max_concurrency.map_or(usize::MAX, |c| c as usize),
        },
    };
    let mut out = crate::io::load_loop::drive(&plan, feed)?;
    out.sort_by_key(|x| x.timing.index);
    Ok((out, pace.wakeups()))
}

/// The single-request client: what every request of a gate without `[load]` goes through to an
/// `http://` serve (warmup, repeats, each arm of a pair or an interleaved baseline), so those requests are
/// sent and timed exactly as a load run's are ([`run`] and this share [`one`]). One current-thread runtime
/// on the calling thread, kept for the client's life, and the kernel's receive stamping held on
/// ([`RxStamps`]) for as long. It does not coalesce wake-ups: at one stream a read taken later than its
/// data arrived lets the kernel merge the segments that queued meanwhile into one carrying the last one's
/// stamp, so the first token's own arrival would be lost whenever the next came within the pause.
pub(crate) struct SingleClient {
    rt: tokio::runtime::Runtime,
    /// Held for the client's life (the kernel stamps reads while it lives).
    _stamps: RxStamps,
}

impl SingleClient {
    /// A client with its runtime and receive stamping on. Errors: the runtime could not start.
    pub(crate) fn new() -> Result<SingleClient, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the client's runtime: {e}"))?;
        Ok(SingleClient {
            rt,
            _stamps: RxStamps::hold(),
        })
    }

    /// Sends `body` (JSON bytes) to `target` and reads the whole reply as timed reads, on the calling
    /// thread; `timeout` bounds the whole request (connect, head and body). Never fails: a transport error
    /// is recorded in the exchange, worded as [`crate::io::client::send_within`] documents.
    pub(crate) fn send(&self, target: &Target, body: &[u8], timeout: Duration) -> Exchange {
        self.rt.block_on(one(target, body, timeout)).0
    }
}

/// One request: connect, write, read the head and the body as timed reads, de-chunked. Returns the
/// exchange, the instant the request was sent (just before its write began, after the connect; the reads
/// and `head_ms` count from it) and the instant it ended. `timeout` bounds the whole request, connect
/// included.
pub(crate) async fn one(
    target: &Target,
    body: &[u8],
    timeout: Duration,
) -> (Exchange, Instant, Instant) {
    let mut r = ResponseReader::new(Instant::now());
    let result = tokio::time::timeout(timeout, exchange(target, body, &mut r)).await;
    let result = match result {
        Ok(res) => res,
        Err(_) => Err(timed_out(timeout, r.kept)),
    };
    let t0 = r.t0;
    let (ex, end) = r.finish(result);
    (ex, t0, end)
}

async fn exchange(target: &Target, body: &[u8], r: &mut ResponseReader) -> Result<(), String> {
    let sock = match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect(&target.addr),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("connect failed: {e}")),
        Err(_) => {
            return Err(format!(
                "connect failed: no connection to {} within {} s",
                target.addr,
                CONNECT_TIMEOUT.as_secs()
            ))
        }
    };
    let _ = sock.set_nodelay(true);
    stamp_receives(&sock);
    let mut wire = request_head(target, body.len()).into_bytes();
    wire.extend_from_slice(body);
    // Reads go through an AsyncFd so a short read can mark the socket drained without a second
    // recvmsg that would only say EAGAIN (tokio's own TcpStream reads do the same); the write too, so the
    // send time is read right before the write(2) that sends the request.
    let sock = sock
        .into_std()
        .map_err(|e| format!("request failed: {e}"))?;
    // SAFETY: the AsyncFd owns the std TcpStream, whose fd stays open and the same until it drops.
    let sock = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            sock,
            Interest::READABLE | Interest::WRITABLE,
        )
    }
    .map_err(|e| format!("request failed: {e}"))?;
    // The request is sent now: what the serve takes to answer counts from here, not from the connect
    // (a client stopped between its connect and its write would otherwise count its stop in TTFT).
    r.sent(Instant::now());
    write_all(&sock, &wire)
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    // Each read's bytes, copied out of the thread's read buffer ([`READ_BUF`]); only as large as the
    // largest read of this request.
    let mut buf = Vec::new();
    // Reads are never stamped before the request was sent nor before the read before them.
    read_response(&sock, &mut buf, r).await
}

/// Writes all of `wire` to the socket: the first write(2) at once (a fresh socket is writable), the rest
/// when the socket is writable again.
async fn write_all(
    sock: &tokio::io::unix::AsyncFd<std::net::TcpStream>,
    mut wire: &[u8],
) -> std::io::Result<()> {
    use std::io::Write;
    while !wire.is_empty() {
        match sock.get_ref().write(wire) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => wire = &wire[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                sock.writable().await?.clear_ready();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Bytes asked of each read.
const READ_BUF_BYTES: usize = 64 * 1024;

thread_local! {
    /// The one read buffer of this thread, which every request's `recvmsg` reads into ([`recv_stamped`]
    /// copies each read's bytes out before it returns, so no read outlives the next). One per thread, as
    /// the floor client's: a buffer per request in flight was 64 KiB of fresh, zeroed pages per stream
    /// (16 MiB at 256 streams, 16 page faults each), more fresh memory than the reads kept as evidence.
    static READ_BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_BUF_BYTES]);
}

/// Reads the response head and body from `sock` as timed reads into `r` (see [`exchange`]).
async fn read_response(
    sock: &tokio::io::unix::AsyncFd<std::net::TcpStream>,
    buf: &mut Vec<u8>,
    r: &mut ResponseReader,
) -> Result<(), String> {
    loop {
        let got = recv_stamped(sock, buf, &mut r.last)
            .await
            .map_err(|e| r.read_error(&e))?;
        if got.n == 0 {
            return r.eof();
        }
        if r.feed(got, &buf[..got.n])? {
            return Ok(());
        }
    }
}

/// Asks the kernel to stamp received segments (`SO_TIMESTAMPNS`); a refusal leaves reads stamped by
/// the client's clock.
fn stamp_receives(sock: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    set_stamping(sock.as_raw_fd());
}

/// One read: waits until the socket is readable, then `recvmsg` into the thread's read buffer
/// ([`READ_BUF`]), whose bytes it leaves in `out` (replacing what was there; `Got::n` of them) (see
/// [`Got`]); `*last` moves to the read's arrival time.
async fn recv_stamped(
    sock: &tokio::io::unix::AsyncFd<std::net::TcpStream>,
    out: &mut Vec<u8>,
    last: &mut Instant,
) -> std::io::Result<Got> {
    use std::os::fd::AsRawFd;
    let fd = sock.get_ref().as_raw_fd();
    loop {
        let mut ready = sock.readable().await?;
        let read = ready.try_io(|_| {
            READ_BUF.with(|b| {
                let mut b = b.borrow_mut();
                let got = recvmsg_stamped_ns(fd, &mut b)?;
                out.clear();
                out.extend_from_slice(&b[..got.0]);
                Ok((got, b.len()))
            })
        });
        match read {
            Ok(Ok(((n, kernel), asked))) => {
                // A read that did not fill the buffer took all there was (epoll is edge-triggered
                // here; data arriving after it sets readiness again).
                if n > 0 && n < asked {
                    ready.clear_ready();
                }
                return Ok(stamp(n, kernel, last));
            }
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
}

/// Intended send times of an open loop, ms from the start: `n` requests at `rate_rps`, `poisson`
/// (exponential gaps, mean 1000 / rate, from a seeded splitmix64 generator: the same seed, the same
/// schedule) or constant (request i at i × 1000 / rate). The first request is due at 0.
pub(crate) fn open_schedule(n: usize, rate_rps: f64, poisson: bool, seed: u64) -> Vec<f64> {
    let mean = 1000.0 / rate_rps;
    let mut state = seed;
    let mut next_u = move || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // (0, 1]: never ln(0).
        ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    };
    let mut t = 0.0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 {
            t += if poisson { -next_u().ln() * mean } else { mean };
        }
        out.push(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_schedules_are_seeded_and_have_the_asked_rate() {
        let a = open_schedule(2000, 10.0, true, 7);
        assert_eq!(a, open_schedule(2000, 10.0, true, 7));
        assert_ne!(a, open_schedule(2000, 10.0, true, 8));
        assert_eq!(a[0], 0.0);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
        // Mean gap 100 ms: 1999 gaps of an exponential with mean 100 sum to 199900 ± a few percent.
        let mean_gap = a[1999] / 1999.0;
        assert!((90.0..110.0).contains(&mean_gap), "{mean_gap}");
        let c = open_schedule(4, 4.0, false, 1);
        assert_eq!(c, vec![0.0, 250.0, 500.0, 750.0]);
    }

    /// Reads against a real loopback socket: the kernel's stamp of data that waited in the socket is its
    /// arrival, not the (later) read; and every read's stamp lies between the request's start and now.
    #[test]
    fn a_read_is_stamped_when_its_data_arrived_not_when_it_was_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        let stamps = RxStamps::hold();
        assert!(
            stamps.on,
            "this kernel gives TCP receive timestamps (Linux >= 4.13)"
        );
        let (arrived, read_at, t0) = rt.block_on(async move {
            let t0 = Instant::now();
            let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
            stamp_receives(&sock);
            let (mut server, _) = listener.accept().unwrap();
            std::io::Write::write_all(&mut server, b"data: x\n\n").unwrap();
            let written = Instant::now();
            // The data waits in the socket while the client is busy elsewhere.
            std::thread::sleep(Duration::from_millis(30));
            let woke = Instant::now();
            let sock = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    sock.into_std().unwrap(),
                    Interest::READABLE,
                )
            }
            .unwrap();
            let mut buf = vec![0u8; 1024];
            let mut last = t0;
            let got = recv_stamped(&sock, &mut buf, &mut last).await.unwrap();
            assert_eq!(&buf[..got.n], b"data: x\n\n");
            assert!(got.stamped && got.returned >= got.at);
            (got.at, Instant::now(), (t0, written, woke))
        });
        let (t0, written, woke) = t0;
        assert!(arrived >= t0 && arrived <= read_at);
        // Stamped by the kernel on arrival (loopback delivers within the write), before the client woke
        // from its sleep to read: a read-time stamp would be after `woke`.
        assert!(
            arrived < woke,
            "stamped {:?} after the write, {:?} after the client woke",
            arrived.saturating_duration_since(written),
            arrived.saturating_duration_since(woke)
        );
    }
}
