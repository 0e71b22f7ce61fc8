//! The load client on several CPUs (`[load] client_cpus`): one client "runtime" per CPU, each on its own
//! thread pinned to its CPU (`sched_setaffinity`), each connecting, stamping and reading its own requests
//! exactly as the one-runtime client does (the kernel's receive stamps, the same wake-up coalescing per
//! thread): a closed loop runs each thread's slots on the thread's own event loop
//! ([`crate::io::load_loop`], as the one-runtime client), an open loop on one current-thread tokio runtime
//! per thread ([`crate::io::load_client::one`]; the arrival process hands requests across threads). The
//! schedule stays one:
//!
//! * **closed loop**: the `concurrency` slots are dealt round the runtimes (slot k to runtime k mod R);
//!   slot k sends request k first and then takes its next request from one shared counter, so the point
//!   keeps exactly `concurrency` requests in flight whichever runtime carries them, and every runtime
//!   carries at least its slots' first requests;
//! * **open loop**: one arrival process (a dispatcher task on runtime 0) sleeps until each request is due,
//!   takes a slot of the one `max_concurrency` cap, and hands the request to the runtime with the fewest
//!   requests in flight (ties: the next after the last chosen). The hand-over to another thread is counted
//!   between `slot_ms` and `sent_ms`.
//!
//! Results merge exactly: every runtime returns its raw per-request records (timings and timed reads, on
//! the one monotonic clock of the process), concatenated and ordered by request index ([`merge`]), never a
//! merge of per-runtime summaries. Each record names its runtime ([`RuntimeTag`]); the run reports per
//! runtime its CPU, the requests it carried and its thread's CPU time ([`RuntimeRecord`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::evidence::load::RuntimeRecord;
use crate::io::load_client::{one, Coalesce, LoadExchange, RxStamps, Schedule, Target, COALESCE};
use crate::io::load_loop::{drive, Feed, Plan};
use crate::spec::load::ClientCpus;
pub use servegate_core::io::exchange::RuntimeTag;
use servegate_core::io::exchange::SendTiming;

/// What a run on pinned runtimes gives: every request's exchange (ordered by index, each naming its
/// runtime) and one account per runtime (by index).
#[derive(Debug)]
pub struct PinnedRun {
    /// One per request started, by index.
    pub exchanges: Vec<LoadExchange>,
    /// One per runtime, by index: CPU, requests carried, thread CPU time.
    pub runtimes: Vec<RuntimeRecord>,
    /// Per runtime, by index: times its thread woke from waiting (its waits for sockets). Not evidence:
    /// bench-self's account of where each runtime's CPU went (a wake-up costs more than a read).
    pub wakeups: Vec<u64>,
}

/// The CPU ids this process may run on (`sched_getaffinity` of the calling thread), ascending. Errors:
/// the call failed (with the OS's reason).
pub fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(format!(
            "cannot read the CPUs this runner may use (sched_getaffinity): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: i is below CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

/// The CPUs `[load] client_cpus` names, checked against `allowed` (the runner's CPUs, ascending): a count
/// takes the first N allowed; a list is kept in its order. Errors name the CPU not allowed, or the count
/// past what is allowed, with the allowed set.
pub fn resolve(cpus: &ClientCpus, allowed: &[usize]) -> Result<Vec<usize>, String> {
    let shown = || {
        allowed
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match cpus {
        ClientCpus::Count(n) => {
            let n = *n as usize;
            if n == 0 || n > allowed.len() {
                return Err(format!(
                    "load.client_cpus = {n}, but this runner may use {} CPU(s) ({}; sched_getaffinity)",
                    allowed.len(),
                    shown()
                ));
            }
            Ok(allowed[..n].to_vec())
        }
        ClientCpus::List(list) => {
            if list.is_empty() {
                return Err("load.client_cpus is an empty list".into());
            }
            if let Some(c) = list.iter().find(|c| !allowed.contains(&(**c as usize))) {
                return Err(format!(
                    "load.client_cpus names CPU {c}, which this runner may not use (allowed: {}; sched_getaffinity)",
                    shown()
                ));
            }
            Ok(list.iter().map(|c| *c as usize).collect())
        }
    }
}

/// How many of a closed loop's `concurrency` slots each of `runtimes` runtimes carries: slot k to
/// runtime k mod `runtimes` (the first `concurrency mod runtimes` carry one more). Sums to
/// `concurrency`.
pub fn spread(concurrency: u32, runtimes: usize) -> Vec<u32> {
    let r = runtimes.max(1) as u32;
    (0..r)
        .map(|i| concurrency / r + u32::from(i < concurrency % r))
        .collect()
}

/// The runtime an open loop hands its next request to: the fewest requests in flight, ties broken by
/// the first at or after `after + 1` (round the runtimes), so equal loads take turns.
pub fn pick(in_flight: &[usize], after: usize) -> usize {
    let r = in_flight.len().max(1);
    (1..=r)
        .map(|k| (after + k) % r)
        .min_by_key(|&i| in_flight.get(i).copied().unwrap_or(usize::MAX))
        .unwrap_or(0)
}

/// Merges per-runtime records into one list ordered by request index: the raw records themselves, so any
/// percentile of the merged list is that of all requests. Errors: a request index carried twice.
pub fn merge(per_runtime: Vec<Vec<LoadExchange>>) -> Result<Vec<LoadExchange>, String> {
    let mut all: Vec<LoadExchange> = per_runtime.into_iter().flatten().collect();
    all.sort_by_key(|x| x.timing.index);
    if let Some(w) = all
        .windows(2)
        .find(|w| w[0].timing.index == w[1].timing.index)
    {
        return Err(format!(
            "the load client's runtimes both carried request {}",
            w[0].timing.index
        ));
    }
    Ok(all)
}

/// What every runtime shares.
struct Shared {
    target: Target,
    bodies: Vec<Vec<u8>>,
    start: Instant,
    stop_at: Option<Instant>,
    timeout: Duration,
    /// Closed loop: the next request index.
    next: AtomicUsize,
    /// Every runtime's pacing: the open loop's dispatcher tells each its next send.
    paces: Vec<Arc<Coalesce>>,
    /// Every runtime thread waits here after pinning itself, so none sends before all are pinned.
    pinned: std::sync::Barrier,
    /// Some runtime thread could not be pinned: none sends.
    pin_failed: std::sync::atomic::AtomicBool,
    /// A closed loop (each thread runs its slots on its own event loop, [`crate::io::load_loop`]).
    closed: bool,
}

impl Shared {
    fn ms(&self, t: Instant) -> f64 {
        t.duration_since(self.start).as_secs_f64() * 1000.0
    }
}

/// A request handed to a runtime by the open loop's dispatcher.
struct Handed {
    index: usize,
    due_ms: f64,
    woke: Instant,
    slot: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
}

/// Runs `bodies` against `target` on `schedule` spread over one pinned runtime per CPU of `cpus` (see
/// the module doc); `deadline` and `timeout` as [`crate::io::load_client::run`]. Returns the merged
/// records and one account per runtime. Errors: no CPU given, a thread that could not be pinned or
/// start its runtime (naming the CPU), or records that do not merge.
pub fn run_pinned(
    target: &Target,
    bodies: Vec<Vec<u8>>,
    schedule: &Schedule,
    deadline: Option<Duration>,
    timeout: Duration,
    cpus: &[usize],
) -> Result<PinnedRun, String> {
    if cpus.is_empty() {
        return Err("the load client was given no CPU".into());
    }
    let _stamps = RxStamps::hold();
    let start = Instant::now();
    let shared = Arc::new(Shared {
        target: target.clone(),
        bodies,
        start,
        stop_at: deadline.map(|d| start + d),
        timeout,
        // A closed loop's slot k sends request k first (below), the rest come from this counter.
        next: AtomicUsize::new(match schedule {
            Schedule::Closed { concurrency } => *concurrency as usize,
            Schedule::Open { .. } => 0,
        }),
        paces: cpus
            .iter()
            .map(|_| Arc::new(Coalesce::new(start, COALESCE)))
            .collect(),
        pinned: std::sync::Barrier::new(cpus.len()),
        pin_failed: std::sync::atomic::AtomicBool::new(false),
        closed: matches!(schedule, Schedule::Closed { .. }),
    });
    let r = cpus.len();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..r {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Handed>();
        senders.push(tx);
        receivers.push(Some(rx));
    }
    let in_flight: Arc<Vec<AtomicUsize>> = Arc::new((0..r).map(|_| AtomicUsize::new(0)).collect());
    let slots = match schedule {
        Schedule::Closed { concurrency } => spread(*concurrency, r),
        Schedule::Open { .. } => vec![0; r],
    };
    let mut senders = Some(senders);
    let results: Vec<Result<(Vec<LoadExchange>, f64), String>> = std::thread::scope(|scope| {
        let mut joins = Vec::new();
        for (i, &cpu) in cpus.iter().enumerate() {
            let tag = RuntimeTag { index: i, cpu };
            let shared = shared.clone();
            let in_flight = in_flight.clone();
            let rx = receivers[i].take();
            // Runtime 0 runs the open loop's dispatcher: it holds every runtime's sender.
            let dispatch = match schedule {
                Schedule::Open {
                    due_ms,
                    max_concurrency,
                } if i == 0 => senders
                    .take()
                    .map(|s| (s, due_ms.clone(), *max_concurrency)),
                _ => None,
            };
            let n_slots = slots[i];
            joins.push(
                scope.spawn(move || runtime_thread(tag, shared, n_slots, rx, dispatch, in_flight)),
            );
        }
        drop(senders.take());
        joins
            .into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err("a load client runtime's thread panicked".into()))
            })
            .collect()
    });
    // The runtime that could not be pinned says why (the others only that they did not send).
    if let Some(Err(e)) = results
        .iter()
        .find(|r| r.as_ref().is_err_and(|e| e.contains("sched_setaffinity")))
    {
        return Err(e.clone());
    }
    let mut per = Vec::new();
    let mut runtimes = Vec::new();
    for (i, res) in results.into_iter().enumerate() {
        let (done, cpu_ms) = res?;
        runtimes.push(RuntimeRecord {
            index: i,
            cpu: cpus[i],
            streams: done.len(),
            cpu_ms,
        });
        per.push(done);
    }
    Ok(PinnedRun {
        exchanges: merge(per)?,
        runtimes,
        wakeups: shared.paces.iter().map(|p| p.wakeups()).collect(),
    })
}

/// The open loop's dispatcher as runtime 0 gets it: every runtime's sender, the due times, the cap.
type Dispatch = (
    Vec<tokio::sync::mpsc::UnboundedSender<Handed>>,
    Vec<f64>,
    Option<u32>,
);

/// One runtime's thread: pin to `tag.cpu`, start a current-thread runtime with its own pacing, run its
/// closed-loop slots or its handed requests (and, on runtime 0 of an open loop, the dispatcher), and
/// return its records with its thread's CPU time, ms.
fn runtime_thread(
    tag: RuntimeTag,
    shared: Arc<Shared>,
    n_slots: u32,
    rx: Option<tokio::sync::mpsc::UnboundedReceiver<Handed>>,
    dispatch: Option<Dispatch>,
    in_flight: Arc<Vec<AtomicUsize>>,
) -> Result<(Vec<LoadExchange>, f64), String> {
    let pin = pin_to(tag.cpu);
    if pin.is_err() {
        shared.pin_failed.store(true, Ordering::SeqCst);
    }
    shared.pinned.wait();
    pin?;
    if shared.pin_failed.load(Ordering::SeqCst) {
        return Err("another runtime could not be pinned: nothing was sent".into());
    }
    let cpu0 = thread_cpu_ms();
    if shared.closed {
        // Slot k (k = index, index + R, ...) sends request k first, so every runtime carries at least
        // its slots' first requests however late its thread starts.
        let firsts = (0..n_slots as usize)
            .map(|j| Some(tag.index + j * shared.paces.len()))
            .collect();
        let plan = Plan {
            target: &shared.target,
            bodies: &shared.bodies,
            start: shared.start,
            stop_at: shared.stop_at,
            timeout: shared.timeout,
            pace: &shared.paces[tag.index],
            runtime: Some(tag),
        };
        let done = drive(
            &plan,
            Feed::Closed {
                firsts,
                next: &shared.next,
            },
        )
        .map_err(|e| format!("{e} (runtime on CPU {})", tag.cpu))?;
        return Ok((done, thread_cpu_ms() - cpu0));
    }
    let pace = shared.paces[tag.index].clone();
    let (before, after) = (pace.clone(), pace);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .on_thread_park(move || before.before_park())
        .on_thread_unpark(move || after.after_unpark())
        .build()
        .map_err(|e| {
            format!(
                "cannot start the load client's runtime on CPU {}: {e}",
                tag.cpu
            )
        })?;
    let done = rt.block_on(async move {
        let mut handles = Vec::new();
        if let Some((senders, due_ms, cap)) = dispatch {
            let (s, f) = (shared.clone(), in_flight.clone());
            handles.push(tokio::spawn(async move {
                dispatcher(s, senders, due_ms, cap, f).await;
                Vec::new()
            }));
        }
        if let Some(mut rx) = rx {
            while let Some(h) = rx.recv().await {
                let (s, f) = (shared.clone(), in_flight.clone());
                handles.push(tokio::spawn(async move {
                    let (ex, sent, end) = one(&s.target, &s.bodies[h.index], s.timeout).await;
                    drop(h.permit);
                    f[tag.index].fetch_sub(1, Ordering::Relaxed);
                    vec![LoadExchange {
                        timing: SendTiming {
                            index: h.index,
                            intended_ms: h.due_ms,
                            woke_ms: s.ms(h.woke),
                            slot_ms: s.ms(h.slot),
                            sent_ms: s.ms(sent),
                            end_ms: s.ms(end),
                            runtime: Some(tag),
                        },
                        exchange: ex,
                    }]
                }));
            }
        }
        let mut all = Vec::new();
        for h in handles {
            if let Ok(v) = h.await {
                all.extend(v);
            }
        }
        all
    });
    Ok((done, thread_cpu_ms() - cpu0))
}

/// The open loop's one arrival process: each request at its due time takes a slot of the one cap and goes
/// to the runtime with the fewest in flight ([`pick`]). Dropping the senders at the end lets every
/// runtime finish.
async fn dispatcher(
    s: Arc<Shared>,
    senders: Vec<tokio::sync::mpsc::UnboundedSender<Handed>>,
    due_ms: Vec<f64>,
    cap: Option<u32>,
    in_flight: Arc<Vec<AtomicUsize>>,
) {
    let cap = cap
        .map(|c| c as usize)
        .unwrap_or(tokio::sync::Semaphore::MAX_PERMITS);
    let slots = Arc::new(tokio::sync::Semaphore::new(cap));
    let mut last_slot = s.start;
    let mut last_pick = senders.len().saturating_sub(1);
    for (i, due) in due_ms.iter().copied().enumerate().take(s.bodies.len()) {
        let due_at = s.start + Duration::from_secs_f64(due.max(0.0) / 1000.0);
        if s.stop_at.is_some_and(|t| due_at >= t) {
            break;
        }
        for p in &s.paces {
            p.next_send(due_at);
        }
        tokio::time::sleep_until(due_at.into()).await;
        // As the one-runtime client: a dispatcher waiting for a slot past the due time was not behind.
        let woke = if last_slot > due_at {
            due_at
        } else {
            Instant::now()
        };
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let slot = Instant::now();
        last_slot = slot;
        let loads: Vec<usize> = in_flight
            .iter()
            .map(|x| x.load(Ordering::Relaxed))
            .collect();
        last_pick = pick(&loads, last_pick);
        in_flight[last_pick].fetch_add(1, Ordering::Relaxed);
        let handed = Handed {
            index: i,
            due_ms: due,
            woke,
            slot,
            permit,
        };
        if senders[last_pick].send(handed).is_err() {
            break;
        }
    }
}

/// Pins the calling thread to CPU `cpu`. Errors name the CPU and the OS's reason.
fn pin_to(cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is past the largest CPU id"));
    }
    // SAFETY: a zeroed cpu_set_t is empty; cpu is below CPU_SETSIZE; the set outlives the call.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!(
            "cannot pin a load client runtime to CPU {cpu} (sched_setaffinity): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The calling thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`, user and system), ms; 0 when the clock
/// cannot be read.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::exchange::{Exchange, ResponseMeta};
    use servegate_core::analysis::stats::percentile;

    fn rec(index: usize, e2e_ms: f64, rt: usize) -> LoadExchange {
        LoadExchange {
            timing: SendTiming {
                index,
                end_ms: e2e_ms,
                runtime: Some(RuntimeTag { index: rt, cpu: rt }),
                ..Default::default()
            },
            exchange: Exchange {
                response: ResponseMeta::default(),
                reads: Vec::new(),
                body_bytes: 0,
                body_truncated: false,
            },
        }
    }

    #[test]
    fn slots_are_dealt_round_the_runtimes_and_sum_to_the_concurrency() {
        assert_eq!(spread(256, 2), vec![128, 128]);
        assert_eq!(spread(5, 2), vec![3, 2]);
        assert_eq!(spread(1, 3), vec![1, 0, 0]);
        assert_eq!(spread(7, 1), vec![7]);
        for c in 0..40 {
            for r in 1..6 {
                let s = spread(c, r);
                assert_eq!(s.iter().sum::<u32>(), c);
                assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn the_open_loop_hands_to_the_least_loaded_runtime_taking_turns_on_ties() {
        assert_eq!(pick(&[3, 1], 1), 1);
        assert_eq!(pick(&[0, 0], 1), 0);
        assert_eq!(pick(&[0, 0], 0), 1);
        assert_eq!(pick(&[2, 2, 2], 2), 0);
        assert_eq!(pick(&[1, 0, 0], 1), 2);
    }

    #[test]
    fn a_count_or_a_list_is_checked_against_the_allowed_cpus() {
        let allowed = [0, 1, 3];
        assert_eq!(resolve(&ClientCpus::Count(2), &allowed), Ok(vec![0, 1]));
        assert_eq!(
            resolve(&ClientCpus::List(vec![3, 0]), &allowed),
            Ok(vec![3, 0])
        );
        let e = resolve(&ClientCpus::List(vec![0, 2]), &allowed).unwrap_err();
        assert!(e.contains("CPU 2") && e.contains("0, 1, 3"), "{e}");
        let e = resolve(&ClientCpus::Count(4), &allowed).unwrap_err();
        assert!(e.contains("= 4") && e.contains("3 CPU(s)"), "{e}");
        assert!(resolve(&ClientCpus::List(vec![]), &allowed).is_err());
        assert!(!allowed_cpus().unwrap().is_empty());
    }

    /// A runtime that cannot be pinned (a CPU id no machine here has) fails the run naming its CPU, and
    /// the runtime that was pinned sends nothing: the listener never sees a connection.
    #[test]
    fn a_cpu_that_cannot_be_pinned_fails_the_run_before_any_send() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let target = Target::parse(&url, None).unwrap();
        let good = allowed_cpus().unwrap()[0];
        let e = run_pinned(
            &target,
            vec![b"{}".to_vec(); 4],
            &Schedule::Closed { concurrency: 2 },
            None,
            Duration::from_secs(5),
            &[good, 1023],
        )
        .unwrap_err();
        assert!(e.contains("CPU 1023"), "{e}");
        assert_eq!(
            listener.accept().map(|_| ()).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
    }

    /// Merging raw records: every percentile of the merged list is that of all requests, where a merge of
    /// the runtimes' own percentiles (their mean) is not.
    #[test]
    fn merged_records_give_the_percentiles_of_all_records() {
        // Runtime 0 carried fast requests, runtime 1 slow ones, interleaved by index.
        let e2e = |i: usize| {
            if i.is_multiple_of(2) {
                10.0 + i as f64
            } else {
                500.0 + 7.0 * i as f64
            }
        };
        let all: Vec<f64> = (0..101).map(e2e).collect();
        let per: Vec<Vec<LoadExchange>> = (0..2)
            .map(|rt| {
                (0..101)
                    .filter(|i| i % 2 == rt)
                    .map(|i| rec(i, e2e(i), rt))
                    .collect()
            })
            .collect();
        let own: Vec<Vec<f64>> = per
            .iter()
            .map(|v| v.iter().map(|x| x.timing.end_ms).collect())
            .collect();
        let merged = merge(per).unwrap();
        assert_eq!(
            merged.iter().map(|x| x.timing.index).collect::<Vec<_>>(),
            (0..101).collect::<Vec<_>>()
        );
        let got: Vec<f64> = merged.iter().map(|x| x.timing.end_ms).collect();
        for p in [50.0, 90.0, 95.0, 99.0] {
            assert_eq!(percentile(&got, p), percentile(&all, p), "p{p}");
            let mean_of_own =
                (percentile(&own[0], p).unwrap() + percentile(&own[1], p).unwrap()) / 2.0;
            assert_ne!(Some(mean_of_own), percentile(&all, p), "p{p}");
        }
        let twice = merge(vec![vec![rec(3, 1.0, 0)], vec![rec(3, 1.0, 1)]]).unwrap_err();
        assert!(twice.contains("request 3"), "{twice}");
    }
}
