//! The floor under a load client on this machine: the least CPU any client can spend per streamed token
//! against the same serve and schedule. A bare `epoll` loop (libc, one thread) that connects, sends the
//! request, and reads every response with `recvmsg` (kernel receive timestamps on, as servegate's load
//! client asks for) until the serve closes; it parses nothing, keeps nothing and times nothing, and it
//! wakes under the same rule as the load client (`servegate::io::load_client::COALESCE`). What it spends
//! is the kernel's share (socket set-up, the reads, the ACKs they send, the wake-ups), which no client
//! written above the socket layer can avoid; the load client's figure minus this one is what servegate
//! itself adds. [`run_threads`] runs the same loop on one pinned thread per CPU (the slots dealt round
//! them, one shared request count): the floor of the load client on several runtimes.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::bench_common::cpu_s_thread;

/// What the floor client did.
#[derive(Debug, Clone, Default)]
pub struct Floor {
    /// Responses read to their end.
    pub completed: usize,
    /// Responses that failed (connect, send or read errors).
    pub failed: usize,
    /// Wall seconds from the first connect to the last close.
    pub wall_s: f64,
    /// This thread's CPU seconds over the same span (`RUSAGE_THREAD`).
    pub cpu_s: f64,
    /// `recvmsg` calls that returned data.
    pub reads: u64,
    /// Times the thread woke from `epoll_wait` or a coalescing sleep.
    pub wakeups: u64,
}

/// Runs `requests` requests of `wire` (a whole HTTP/1.1 request with `Connection: close`) against `addr`
/// in a closed loop of `concurrency`, on the calling thread. `quantum`: after a wait for data shorter than
/// it, sleep until this long after the wake-up before waiting again (zero: never).
pub fn run(
    addr: SocketAddr,
    wire: &[u8],
    concurrency: usize,
    requests: usize,
    quantum: Duration,
) -> Result<Floor, String> {
    // Receive stamps on before the first response, as the load client has them (it costs the kernel a
    // clock read per segment).
    let _stamps = servegate::io::load_client::RxStamps::hold();
    let next = AtomicUsize::new(0);
    run_slots(
        addr,
        wire,
        concurrency.min(requests),
        &next,
        requests,
        quantum,
    )
}

/// The same closed loop spread over one thread per CPU of `on`, each pinned to its CPU before any
/// sends (a barrier), as `servegate::io::load_cores::run_pinned` spreads the load client's: the
/// `concurrency` slots dealt round the threads (`load_cores::spread`), every next request taken from one
/// shared counter. Returns each thread's account, in the order of `on`. It is the like-for-like floor of
/// the client on several runtimes: each thread pays its own wake-ups for its share of the streams, on its
/// own CPU. Errors: a thread that could not be pinned (naming its CPU), or one that failed.
pub fn run_threads(
    addr: SocketAddr,
    wire: &[u8],
    concurrency: usize,
    requests: usize,
    quantum: Duration,
    on: &[usize],
) -> Result<Vec<Floor>, String> {
    let _stamps = servegate::io::load_client::RxStamps::hold();
    let slots = servegate::io::load_cores::spread(concurrency.min(requests) as u32, on.len());
    let next = AtomicUsize::new(0);
    let ready = std::sync::Barrier::new(on.len());
    std::thread::scope(|scope| {
        let joins: Vec<_> = on
            .iter()
            .zip(slots)
            .map(|(&cpu, n)| {
                let (next, ready) = (&next, &ready);
                scope.spawn(move || {
                    let pinned = crate::bench_common::pin_self(cpu);
                    ready.wait();
                    if !pinned {
                        return Err(format!("cannot pin a floor thread to CPU {cpu}"));
                    }
                    run_slots(addr, wire, n as usize, next, requests, quantum)
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err("a floor thread panicked".into()))
            })
            .collect()
    })
}

/// One thread's closed loop: `slots` requests in flight, each next one counted off `next` until
/// `requests` have started (on every thread that shares `next`).
fn run_slots(
    addr: SocketAddr,
    wire: &[u8],
    slots: usize,
    next: &AtomicUsize,
    requests: usize,
    quantum: Duration,
) -> Result<Floor, String> {
    // SAFETY: epoll_create1 has no preconditions; the fd is closed below.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(format!(
            "epoll_create1: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut open: HashMap<i32, TcpStream> = HashMap::new();
    let mut floor = Floor::default();
    // Takes the next request off the shared count: false once every request has started.
    let take = || next.fetch_add(1, Ordering::Relaxed) < requests;
    let cpu0 = cpu_s_thread();
    let t0 = Instant::now();
    let start_one = |open: &mut HashMap<i32, TcpStream>| -> Result<(), String> {
        let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let _ = s.set_nodelay(true);
        s.write_all(wire).map_err(|e| format!("send: {e}"))?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        let fd = s.as_raw_fd();
        servegate::io::load_client::set_stamping(fd);
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: fd as u64,
        };
        // SAFETY: epoll_ctl on fds we own, with an event we own.
        unsafe {
            if libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) != 0 {
                return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
            }
        }
        open.insert(fd, s);
        Ok(())
    };
    for _ in 0..slots {
        if take() && start_one(&mut open).is_err() {
            floor.failed += 1;
        }
    }
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let mut busy = false;
    let mut woke = Instant::now();
    while !open.is_empty() {
        if busy && !quantum.is_zero() {
            let until = woke + quantum;
            let now = Instant::now();
            if until > now {
                std::thread::sleep(until - now);
            }
        }
        let parked = Instant::now();
        // SAFETY: events has room for its length; ep is our epoll fd.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 60_000) };
        woke = Instant::now();
        busy = woke.duration_since(parked) < quantum;
        floor.wakeups += 1;
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("epoll_wait: {e}"));
        }
        if n == 0 {
            return Err("epoll_wait: no data for 60 s".into());
        }
        for ev in &events[..n as usize] {
            let fd = ev.u64 as i32;
            // The serve closed: read to the end even after a short read (no edge will follow).
            let closing = ev.events & (libc::EPOLLRDHUP | libc::EPOLLHUP) as u32 != 0;
            // None: still open; Some(true): read to its end; Some(false): failed.
            let ended = loop {
                match servegate::io::load_client::recvmsg_stamped(fd, &mut buf) {
                    Ok((0, _)) => break Some(true), // the serve closed: the response is whole
                    Ok((got, _)) => {
                        floor.reads += 1;
                        if got < buf.len() && !closing {
                            break None; // drained: edge-triggered epoll reports the next arrival
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break None,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break Some(false),
                }
            };
            if let Some(whole) = ended {
                open.remove(&fd); // closing the socket removes it from the epoll set
                if whole {
                    floor.completed += 1;
                } else {
                    floor.failed += 1;
                }
                if take() && start_one(&mut open).is_err() {
                    floor.failed += 1;
                }
            }
        }
    }
    floor.wall_s = t0.elapsed().as_secs_f64();
    floor.cpu_s = cpu_s_thread() - cpu0;
    // SAFETY: ep is our epoll fd, closed once.
    unsafe { libc::close(ep) };
    Ok(floor)
}

/// The HTTP/1.1 request the floor client sends: the load client's request line and headers for `body`
/// to `host` (`host:port`), `Connection: close`.
pub fn wire(host: &str, body: &[u8]) -> Vec<u8> {
    let mut w = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    w.extend_from_slice(body);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-thread floor runs every request once, to its end, each thread at least its slots' first
    /// requests, against a listener that answers each connection with a whole response and closes.
    #[test]
    fn two_threads_share_one_count_of_requests() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = 12;
        let serve = std::thread::spawn(move || {
            for _ in 0..requests {
                let (mut s, _) = listener.accept().unwrap();
                let mut head = [0u8; 4096];
                let _ = std::io::Read::read(&mut s, &mut head);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: x\n\n");
            }
        });
        let cpus = servegate::io::load_cores::allowed_cpus().unwrap();
        let on = [cpus[0], *cpus.last().unwrap()];
        let threads = run_threads(
            addr,
            &wire(&addr.to_string(), b"{}"),
            4,
            requests,
            Duration::ZERO,
            &on,
        )
        .unwrap();
        serve.join().unwrap();
        assert_eq!(threads.len(), 2);
        assert_eq!(threads.iter().map(|t| t.completed).sum::<usize>(), requests);
        for t in &threads {
            assert_eq!(t.failed, 0);
            assert!(t.completed >= 2, "{t:?}");
            assert!(t.reads >= t.completed as u64, "{t:?}");
        }
    }

    #[test]
    fn the_request_is_whole_http() {
        let w = wire("127.0.0.1:9", b"{}");
        let text = String::from_utf8(w).unwrap();
        assert!(text.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"));
        assert!(text.contains("Content-Length: 2\r\n"));
        assert!(text.ends_with("\r\n\r\n{}"));
    }
}
