//! The gate's `[[sample]]` samplers, run during the run: one thread per sampler reads its command's stdout or
//! its file every `every_ms`, takes the number with its regex and keeps `(ms, value)`. A sample that fails
//! (the command cannot start, exits non-zero, outlives `timeout_ms` and is killed with its process group,
//! prints no match, or a number that is not one) gives no value and its reason is counted; nothing a sampler
//! does stops the run or touches the serve. Linux (process groups).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::evidence::footprint::SampleSeries;
use crate::spec::sample::{SampleSource, SampleSpec};

/// Most bytes of a command's stdout or a file read for one sample (the rest is drained, unread).
pub(crate) const READ_CAP: usize = 64 * 1024;
/// Distinct failure reasons kept per sampler.
const MAX_REASONS: usize = 8;

/// The running samplers of one run; [`Samplers::finish`] stops them and gives their series.
pub(crate) struct Samplers {
    stop: Vec<mpsc::Sender<()>>,
    threads: Vec<JoinHandle<SampleSeries>>,
}

impl Samplers {
    /// Starts one thread per sampler; the first sample is taken at once.
    pub(crate) fn start(specs: &[SampleSpec]) -> Samplers {
        let mut stop = Vec::new();
        let mut threads = Vec::new();
        for spec in specs {
            let (tx, rx) = mpsc::channel::<()>();
            let spec = spec.clone();
            let name = format!("servegate-sample-{}", spec.name);
            let series = SampleSeries {
                name: spec.name.clone(),
                unit: spec.unit.clone(),
                every_ms: spec.every_ms,
                ..SampleSeries::default()
            };
            if let Ok(h) = std::thread::Builder::new()
                .name(name)
                .spawn(move || run(&spec, rx))
            {
                stop.push(tx);
                threads.push(h);
            } else {
                // No thread: the series says why, and the run goes on.
                threads.push(std::thread::spawn(move || SampleSeries {
                    reasons: vec!["the sampler's thread could not be started".into()],
                    ..series
                }));
            }
        }
        Samplers { stop, threads }
    }

    /// Stops every sampler (a sample under way finishes, within its timeout) and returns their series, in
    /// the gate's order.
    pub(crate) fn finish(self) -> Vec<SampleSeries> {
        drop(self.stop);
        self.threads
            .into_iter()
            .map(|t| t.join().unwrap_or_default())
            .collect()
    }
}

/// A sampler's loop: a sample every `every_ms` until the stop channel closes.
fn run(spec: &SampleSpec, stop: mpsc::Receiver<()>) -> SampleSeries {
    let t0 = Instant::now();
    let mut series = SampleSeries {
        name: spec.name.clone(),
        unit: spec.unit.clone(),
        every_ms: spec.every_ms,
        ..SampleSeries::default()
    };
    let mut reasons: Vec<(String, u64)> = Vec::new();
    let every = Duration::from_millis(spec.every_ms);
    let mut next = t0;
    loop {
        let at = t0.elapsed().as_secs_f64() * 1000.0;
        series.taken += 1;
        match sample_once(spec) {
            Ok(v) => series.values.push(((at * 10.0).round() / 10.0, v)),
            Err(why) => {
                series.failed += 1;
                if let Some(i) = reasons.iter().position(|(r, _)| *r == why) {
                    reasons[i].1 += 1;
                } else if reasons.len() < MAX_REASONS {
                    reasons.push((why, 1));
                }
            }
        }
        next += every;
        let wait = next.saturating_duration_since(Instant::now());
        match stop.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    series.reasons = reasons
        .into_iter()
        .map(|(r, n)| format!("{r} ({n})"))
        .collect();
    series
}

/// One sample: the source's text, its number.
pub(crate) fn sample_once(spec: &SampleSpec) -> Result<f64, String> {
    let text = match &spec.source {
        SampleSource::Path(p) => read_file(p)?,
        SampleSource::Command(argv) => run_command(argv, Duration::from_millis(spec.timeout_ms))?,
    };
    number(&spec.regex, &text)
}

/// The number `re` takes from `text`: its group `value`, else its first group, else the whole match.
pub(crate) fn number(re: &regex::Regex, text: &str) -> Result<f64, String> {
    let Some(c) = re.captures(text) else {
        let head: String = text.trim().chars().take(60).collect();
        return Err(format!("no match of /{}/ in {head:?}", re.as_str()));
    };
    let m = c
        .name("value")
        .or_else(|| c.get(1))
        .or_else(|| c.get(0))
        .map(|m| m.as_str())
        .unwrap_or_default();
    match m.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("the match {:?} is not a number", m.trim())),
    }
}

fn read_file(p: &std::path::Path) -> Result<String, String> {
    let f = std::fs::File::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    let mut buf = Vec::new();
    f.take(READ_CAP as u64)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Runs `argv` in its own process group with stdin null and stderr discarded; its stdout (the first
/// [`READ_CAP`] bytes) when it exits 0 within `timeout`. Past the timeout the group is killed.
fn run_command(argv: &[String], timeout: Duration) -> Result<String, String> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
    let pid = child.id();
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.by_ref().take(READ_CAP as u64).read_to_end(&mut buf);
            // Drain the rest so the command never blocks on a full pipe.
            let _ = std::io::copy(o, &mut std::io::sink());
        }
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("cannot wait for {}: {e}", argv[0])),
        }
    };
    let Some(status) = status else {
        // SAFETY: killpg on the command's own group (its pid, process_group(0)); no memory is touched.
        unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
        let _ = child.wait();
        let _ = reader.join();
        return Err(format!(
            "timed out after {} ms (killed)",
            timeout.as_millis()
        ));
    };
    // Whatever the command left running in its group would keep the pipe open: it goes too.
    // SAFETY: as above.
    unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
    let buf = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("{} exited with {status}", argv[0]));
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(source: SampleSource, re: &str, timeout_ms: u64) -> SampleSpec {
        SampleSpec {
            name: "s".into(),
            source,
            regex: regex::Regex::new(re).unwrap(),
            unit: "MiB".into(),
            every_ms: 100,
            timeout_ms,
        }
    }

    fn sh(script: &str) -> SampleSource {
        SampleSource::Command(vec!["sh".into(), "-c".into(), script.into()])
    }

    #[test]
    fn a_command_a_file_and_their_failures() {
        let ok = spec(
            sh("echo 'mem used: 812.5 MiB'"),
            r"used: (?P<value>[\d.]+)",
            5000,
        );
        assert_eq!(sample_once(&ok), Ok(812.5));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("power1_input");
        std::fs::write(&p, "4200000\n").unwrap();
        assert_eq!(
            sample_once(&spec(SampleSource::Path(p.clone()), r"(\d+)", 5000)),
            Ok(4_200_000.0)
        );
        let e = sample_once(&spec(
            SampleSource::Path(dir.path().join("no")),
            r"(\d+)",
            5000,
        ));
        assert!(e.unwrap_err().starts_with("cannot read"));
        let e = sample_once(&spec(sh("echo nothing here"), r"used: (\d+)", 5000)).unwrap_err();
        assert!(
            e.starts_with("no match of /used: (\\d+)/ in \"nothing here\""),
            "{e}"
        );
        let e = sample_once(&spec(sh("echo used: 5; exit 3"), r"used: (\d+)", 5000)).unwrap_err();
        assert!(e.contains("exited with exit status: 3"), "{e}");
        let e = sample_once(&spec(sh("echo x: abc"), r"x: (\w+)", 5000)).unwrap_err();
        assert!(e.contains("is not a number"), "{e}");
        let e = sample_once(&spec(
            SampleSource::Command(vec!["/nonexistent/tool".into()]),
            r"(\d+)",
            5000,
        ))
        .unwrap_err();
        assert!(e.starts_with("cannot start /nonexistent/tool"), "{e}");
    }

    /// A hanging command (and a child it left holding the pipe) is killed at its timeout; the sample says
    /// so within the timeout plus a margin for a busy runner.
    #[test]
    fn a_hanging_command_is_killed_at_its_timeout() {
        let t = Instant::now();
        let e = sample_once(&spec(sh("sleep 30 & sleep 30"), r"(\d+)", 300)).unwrap_err();
        assert_eq!(e, "timed out after 300 ms (killed)");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    #[test]
    fn samplers_run_until_finished_and_count_their_failures() {
        let specs = vec![
            spec(sh("echo 7"), r"(\d+)", 2000),
            spec(sh("echo none"), r"(\d+)", 2000),
        ];
        let mut specs = specs;
        specs[1].name = "t".into();
        let s = Samplers::start(&specs);
        std::thread::sleep(Duration::from_millis(350));
        let out = s.finish();
        assert_eq!(out.len(), 2);
        assert!(out[0].values.len() >= 2, "{:?}", out[0]);
        assert!(out[0].values.iter().all(|(_, v)| *v == 7.0));
        assert_eq!(out[0].failed, 0);
        assert!(out[1].values.is_empty() && out[1].failed == out[1].taken && out[1].taken >= 2);
        assert!(out[1].reasons[0].starts_with("no match"), "{:?}", out[1]);
    }
}
