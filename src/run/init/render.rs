//! The text of the gate `servegate init` writes (and of the measuring round it runs first): TOML whose every
//! value from outside (a model name, a URL, a log path, a regex, a command word) is a basic string with its
//! quotes, backslashes, control and invisible characters escaped and its braces doubled where placeholders
//! expand, and whose every comment is one printable line ([`crate::text::shown`]). Pure: values in, text out.

use std::fmt::Write as _;

use super::route_lines::Candidate;

/// The prompts of the measured round, timed: each asks for more text than `max_tokens` allows, so every
/// reply decodes long enough to be measured.
pub(crate) const TIMED_PROMPTS: [&str; 3] = [
    "Explain in three sentences why the sky is blue.",
    "Write a short poem about a river.",
    "Describe in a few sentences how a bicycle works.",
];
/// The known-answer prompt (asked for its answer only: untimed) and the answer it must give.
pub(crate) const KNOWN_PROMPT: &str = "What is the capital of France? Answer in one sentence.";
/// The known answer, a regex.
pub(crate) const KNOWN_REGEX: &str = r"(?i)\bparis\b";
/// The cheap `[contract]` checks the measured round tries (a few short requests each, docs/contract.md).
pub(crate) const CHEAP_CHECKS: [&str; 5] =
    ["shape", "max_tokens", "usage", "stream_parity", "models"];

/// `s` as a TOML basic string: `"` and `\` escaped, every control or invisible character as `\uXXXX` (or
/// `\UXXXXXXXX`), so the value round-trips byte for byte and the line holds no raw control byte.
pub(crate) fn toml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || crate::text::is_unsafe(c) => {
                if (c as u32) <= 0xFFFF {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08X}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A regex as TOML: a literal string (`'...'`, no escapes to read) when it holds no `'` and no control or
/// invisible character, else [`toml_str`].
pub(crate) fn toml_regex(s: &str) -> String {
    if s.chars()
        .any(|c| c == '\'' || c.is_control() || crate::text::is_unsafe(c))
    {
        toml_str(s)
    } else {
        format!("'{s}'")
    }
}

/// `s` with `{` and `}` doubled: a literal value in a string whose placeholders expand (`request.model`,
/// `serve.url`, `serve.log_file`).
pub(crate) fn literal(s: &str) -> String {
    s.replace('{', "{{").replace('}', "}}")
}

/// Where the written gate will live, so that the paths it names survive a commit and another machine: a
/// path under the servegate cache is written `{cache}/...`, one under the gate's directory `{gate_dir}/...`
/// and one under its parent (the checkout holding `gates/`) `{gate_dir}/../...`, the placeholders every gate
/// expands (docs/gate-format.md); any other path stays as it is. [`Portable::none`] rewrites nothing (the
/// measuring round's gate).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Portable {
    /// `(absolute directory, its placeholder)`, the longest directory first.
    dirs: Vec<(String, &'static str)>,
}

impl Portable {
    /// Rewrites nothing.
    pub(crate) fn none() -> Portable {
        Portable::default()
    }

    /// For a gate written in `gate_dir` (absolute) with the servegate cache at `cache` (absolute).
    pub(crate) fn new(gate_dir: &std::path::Path, cache: &std::path::Path) -> Portable {
        let mut dirs: Vec<(String, &'static str)> = vec![
            (cache.display().to_string(), "{cache}"),
            (gate_dir.display().to_string(), "{gate_dir}"),
        ];
        if let Some(up) = gate_dir.parent().filter(|p| p.parent().is_some()) {
            dirs.push((up.display().to_string(), "{gate_dir}/.."));
        }
        dirs.retain(|(d, _)| d.len() > 1 && d.starts_with('/'));
        dirs.sort_by_key(|(d, _)| std::cmp::Reverse(d.len()));
        Portable { dirs }
    }

    /// `s` (a path, or a word that is one) with its directory written as the placeholder, when it is under one.
    pub(crate) fn path(&self, s: &str) -> String {
        for (dir, ph) in &self.dirs {
            if let Some(rest) = s.strip_prefix(dir.as_str()) {
                if rest.is_empty() || rest.starts_with('/') {
                    return format!("{ph}{rest}");
                }
            }
        }
        s.to_string()
    }
}

/// A comment: `# ` and `s` made one printable line.
pub(crate) fn comment(s: &str) -> String {
    format!("# {}\n", crate::text::shown(s))
}

/// How the gate reaches its serve.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ServeBlock {
    /// `command = [...]`, as the user wrote it (its `{port}` and `{host}` placeholders kept).
    Command(Vec<String>),
    /// `url = ...` and, with a log, `log_file = ...` (both literal).
    Url {
        /// The base URL.
        url: String,
        /// The serve's log file, absolute.
        log_file: Option<String>,
    },
}

/// Everything the written gate states, measured or found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draft {
    /// `[gate] name`.
    pub name: String,
    /// Lines for the head comment (what init found), each escaped when written.
    pub found: Vec<String>,
    /// How the serve is reached.
    pub serve: ServeBlock,
    /// `[serve] engine`, when detected.
    pub engine: Option<&'static str>,
    /// `[serve] ready`.
    pub ready: String,
    /// `[serve.env]` of a serve init started: the variables of init's environment that steer it (name,
    /// value; `env::serve_env`).
    pub env: Vec<(String, String)>,
    /// Names of steering variables that hold secrets: named in a comment, never written.
    pub env_secrets: Vec<String>,
    /// For a serve init started: the seconds it took to answer in init's run (the written `ready_timeout_s`
    /// is [`super::written_ready_timeout_s`] of it); None for a url serve.
    pub ready_s: Option<f64>,
    /// `[serve] expect_model`, when the serve lists the model.
    pub expect_model: Option<String>,
    /// The served model name (the body's `model`).
    pub model: String,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// Judged rounds of the prompts.
    pub repeats: u32,
    /// The greedy-parity fields of the engine's profile (`[request.extra]`).
    pub greedy: Vec<(&'static str, f64)>,
    /// Route candidates (the first is written as `fast`), or none with the reason (comment lines).
    pub route: Vec<Candidate>,
    /// Comment lines above `[assert.route]` (or in its place).
    pub route_notes: Vec<String>,
    /// The rate floor and its provenance lines.
    pub floor: Option<(f64, Vec<String>)>,
    /// The first-token limit and its provenance lines.
    pub first_token: Option<(f64, Vec<String>)>,
    /// The known answer: `Ok(())` it matched in the measured round; `Err(what was said)`.
    pub known_answer: Result<(), String>,
    /// The contract checks that passed in the measured round.
    pub contract: Vec<String>,
    /// Comment lines above `[contract]`.
    pub contract_notes: Vec<String>,
}

/// `ready_timeout_s` of the gate a serve block is written for: the measuring round's wait, or the written
/// gate's from the measured start-up.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ReadyWait {
    /// The measuring round's gate (the serve is already up).
    Measuring,
    /// The written gate: from [`Draft::ready_s`].
    Written,
}

fn serve_block(out: &mut String, d: &Draft, wait: ReadyWait, p: &Portable) {
    out.push_str("[serve]\n");
    match &d.serve {
        ServeBlock::Command(argv) => {
            let words: Vec<String> = argv.iter().map(|a| toml_str(&p.path(a))).collect();
            let _ = writeln!(out, "command = [{}]", words.join(", "));
            out.push_str("port = 0                 # a free port each run, filled into {port}\n");
        }
        ServeBlock::Url { url, log_file } => {
            out.push_str(&comment(
                "A serve that is already running: nothing is started or stopped. Only the log bytes written during the run are read.",
            ));
            let _ = writeln!(out, "url = {}", toml_str(&literal(url)));
            if let Some(l) = log_file {
                let _ = writeln!(out, "log_file = {}", toml_str(&p.path(&literal(l))));
            }
        }
    }
    if let Some(e) = d.engine {
        let _ = writeln!(
            out,
            "engine = {}      # detected; its profile sets the clock and the greedy fields (docs/runtimes.md)",
            toml_str(e)
        );
    }
    let _ = writeln!(out, "ready = {}", toml_str(&d.ready));
    if matches!(d.serve, ServeBlock::Command(_)) {
        match (wait, d.ready_s) {
            (ReadyWait::Written, Some(s)) => {
                let _ = writeln!(
                    out,
                    "ready_timeout_s = {}     # model load included: it answered after {s:.1} s in init's run; 5x that (at least 120)",
                    super::written_ready_timeout_s(s)
                );
            }
            (ReadyWait::Written, None) => {
                let _ = writeln!(
                    out,
                    "ready_timeout_s = 120     # model load included; tighten to a few times the load you see"
                );
            }
            (ReadyWait::Measuring, _) => {
                out.push_str("ready_timeout_s = 600\n");
            }
        }
    }
    if let Some(m) = &d.expect_model {
        let _ = writeln!(
            out,
            "expect_model = {}   # /v1/models must list it: another server on the port fails the gate",
            toml_str(m)
        );
    }
    out.push('\n');
    if wait == ReadyWait::Written && matches!(d.serve, ServeBlock::Command(_)) {
        env_block(out, d, p);
    }
}

/// `[serve.env]`: the steering variables init's serve ran with, and a comment naming the secret ones.
fn env_block(out: &mut String, d: &Draft, p: &Portable) {
    if d.env.is_empty() && d.env_secrets.is_empty() {
        return;
    }
    if !d.env_secrets.is_empty() {
        out.push_str(&comment(&format!(
            "Set in init's environment and not written (secrets): {}. Set them where the gate runs (CI secrets).",
            d.env_secrets.join(", ")
        )));
    }
    if d.env.is_empty() {
        out.push('\n');
        return;
    }
    out.push_str(&comment(
        "The serve ran with these from init's environment; written so it starts the same way where they are unset.",
    ));
    out.push_str("[serve.env]\n");
    for (k, v) in &d.env {
        let _ = writeln!(out, "{} = {}", toml_key(k), toml_str(&p.path(v)));
    }
    out.push('\n');
}

/// A TOML key: bare when it is one (letters, digits, `_`, `-`), else quoted.
fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        toml_str(k)
    }
}

/// `[request]`; `timed` is how many of its prompts are timed (the known-answer prompt is untimed only under
/// an `[assert.known_answer]` that names it).
fn request_block(out: &mut String, d: &Draft, warmup_requests: u32, timed: usize, p: &Portable) {
    out.push_str("[request]\n");
    let _ = writeln!(out, "model = {}", toml_str(&p.path(&literal(&d.model))));
    let _ = writeln!(
        out,
        "max_tokens = {}          # every timed reply decodes this many tokens at most",
        d.max_tokens
    );
    out.push_str(
        "temperature = 0          # greedy: the known answer is the same text every time\n",
    );
    out.push_str("stream = true\n");
    let _ = writeln!(
        out,
        "warmup_requests = {warmup_requests}      # the first request after load is recorded, never judged"
    );
    let _ = writeln!(
        out,
        "repeats = {}              # n = {} x {} timed prompts = {} timed replies (the floor's bound needs >= 5)",
        d.repeats,
        d.repeats,
        timed,
        d.repeats as usize * timed
    );
    out.push_str("prompts = [\n");
    for p in TIMED_PROMPTS.iter().chain(std::iter::once(&KNOWN_PROMPT)) {
        let _ = writeln!(out, "  {},", toml_str(p));
    }
    out.push_str("]\n");
    if !d.greedy.is_empty() {
        out.push_str(&comment(
            "The engine profile's greedy-parity fields: replies comparable across engines and releases.",
        ));
        out.push_str("[request.extra]\n");
        for (k, v) in &d.greedy {
            let _ = writeln!(out, "{k} = {}", toml_edit::Value::from(*v));
        }
    }
    out.push('\n');
}

/// The gate of the measuring round: the serve and request blocks of the gate to write, figure assertions
/// that decide nothing (a floor of 0.001 tok/s, a first-token limit of 1e9 ms: their values are what init
/// reads), content, the known answer, and the cheap contract checks as `may_lack`.
pub(crate) fn measuring_text(d: &Draft) -> String {
    let mut out = String::new();
    out.push_str(&comment(
        "servegate init: the measured round (its values derive the gate's bounds; these bounds decide nothing)",
    ));
    let _ = writeln!(
        out,
        "[gate]\nname = {}\n",
        toml_str(&format!("{}-init", d.name))
    );
    serve_block(&mut out, d, ReadyWait::Measuring, &Portable::none());
    request_block(&mut out, d, 1, TIMED_PROMPTS.len(), &Portable::none());
    out.push_str("[assert.rate]\nfloor_tok_s = 0.001\n\n[assert.first_token]\nlimit_ms = 1e9\n\n");
    out.push_str("[assert.content]\n\n");
    let _ = writeln!(
        out,
        "[assert.known_answer]\nprompt = {}\nmatches = {}\nidentical = true\nuntimed = true\n",
        toml_str(KNOWN_PROMPT),
        toml_regex(KNOWN_REGEX)
    );
    let checks: Vec<String> = CHEAP_CHECKS.iter().map(|c| toml_str(c)).collect();
    let _ = writeln!(out, "[contract]\nmay_lack = [{}]", checks.join(", "));
    out
}

/// The gate `servegate init` writes, commented: what was found, each bound with the rule and numbers it came
/// from, and what to tighten.
pub(crate) fn gate_text(d: &Draft, p: &Portable) -> String {
    let mut out = String::new();
    out.push_str(&comment(&format!(
        "Written by servegate init ({}). Check it with `servegate check`, run it with `servegate run`.",
        crate::evidence::now_utc()
    )));
    out.push_str(&comment(
        "Every bound below comes from one measured round on this machine: review each comment, tighten, commit.",
    ));
    for f in &d.found {
        out.push_str(&comment(&format!("found: {f}")));
    }
    out.push('\n');
    let _ = writeln!(out, "[gate]\nname = {}", toml_str(&d.name));
    let _ = writeln!(
        out,
        "description = {}\n",
        toml_str(&format!(
            "{} on its route, at speed, with sane answers (written by servegate init)",
            crate::text::shown(&d.model)
        ))
    );
    serve_block(&mut out, d, ReadyWait::Written, p);
    // Without [assert.known_answer] its prompt is asked as the others are: timed.
    let timed = TIMED_PROMPTS.len() + usize::from(d.known_answer.is_err());
    request_block(&mut out, d, 1, timed, p);

    // Route.
    for n in &d.route_notes {
        out.push_str(&comment(n));
    }
    match d.route.split_first() {
        Some((best, rest)) => {
            out.push_str("[assert.route]\n");
            out.push_str(&comment(&format!(
                "from serve.log line {} ({}): {:?}",
                best.line_no, best.why, best.line
            )));
            let _ = writeln!(out, "fast = {}", toml_regex(&best.regex));
            out.push_str(&comment(
                "Tighten: keep only what names the fast route, and add `slow = '...'`, a line only the slow route prints.",
            ));
            for c in rest {
                out.push_str(&comment(&format!(
                    "other candidate, serve.log line {} ({}): {:?}",
                    c.line_no, c.why, c.line
                )));
                out.push_str(&comment(&format!("fast = {}", toml_regex(&c.regex))));
            }
            out.push('\n');
        }
        None => out.push('\n'),
    }

    if let Some((floor, lines)) = &d.floor {
        out.push_str("[assert.rate]\n");
        for l in lines {
            out.push_str(&comment(l));
        }
        let _ = writeln!(out, "floor_tok_s = {}\n", toml_edit::Value::from(*floor));
    }
    if let Some((limit, lines)) = &d.first_token {
        out.push_str("[assert.first_token]\n");
        for l in lines {
            out.push_str(&comment(l));
        }
        let _ = writeln!(out, "limit_ms = {}\n", toml_edit::Value::from(*limit));
    }
    out.push_str(
        "[assert.content]         # no error, not truncated, not empty, not degenerate\n\n",
    );
    match &d.known_answer {
        Ok(()) => {
            let _ = writeln!(
                out,
                "[assert.known_answer]\nprompt = {}\nmatches = {}\nidentical = true         # greedy: every repeat the same text\nuntimed = true           # asked for its answer only; never timed\n",
                toml_str(KNOWN_PROMPT),
                toml_regex(KNOWN_REGEX)
            );
        }
        Err(said) => {
            out.push_str(&comment(&format!(
                "No known answer: in the measured round {said}"
            )));
            out.push_str(&comment(
                "Add one the model does answer: [assert.known_answer] prompt = \"...\" matches = '...' (docs/gate-format.md).",
            ));
            out.push('\n');
        }
    }
    for n in &d.contract_notes {
        out.push_str(&comment(n));
    }
    if !d.contract.is_empty() {
        let checks: Vec<String> = d.contract.iter().map(|c| toml_str(c)).collect();
        let _ = writeln!(out, "[contract]\nexpect = [{}]", checks.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_string_round_trips_through_toml() {
        let s = "evil\"name'\n[serve]\nurl = \"x\"\u{1b}[31m\u{202e}\\{port}";
        let text = format!("v = {}\n", toml_str(s));
        assert!(!text[..text.len() - 1].contains('\n'), "{text}");
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["v"].as_str(), Some(s));
        for r in [r"a\d+ 'b'", r"(?i)\bparis\b"] {
            let v: toml::Value = toml::from_str(&format!("v = {}\n", toml_regex(r))).unwrap();
            assert_eq!(v["v"].as_str(), Some(r));
        }
    }

    #[test]
    fn a_comment_is_one_printable_line() {
        let c = comment("a\nb\r\u{1b}[2J c");
        assert_eq!(c.matches('\n').count(), 1);
        assert!(!c.contains('\u{1b}') && !c.contains('\r'));
    }
}

#[cfg(test)]
mod portable_tests {
    use super::Portable;
    use std::path::Path;

    #[test]
    fn paths_under_the_cache_the_gate_dir_and_its_checkout_become_placeholders() {
        let p = Portable::new(
            Path::new("/w/repo/gates"),
            Path::new("/root/.cache/servegate"),
        );
        assert_eq!(
            p.path("/root/.cache/servegate/models/m.gguf"),
            "{cache}/models/m.gguf"
        );
        assert_eq!(p.path("/w/repo/gates/x.sh"), "{gate_dir}/x.sh");
        assert_eq!(
            p.path("/w/repo/scripts/reference-serve"),
            "{gate_dir}/../scripts/reference-serve"
        );
        assert_eq!(p.path("/w/repo"), "{gate_dir}/..");
        // Only at a path boundary; anything else as it was.
        assert_eq!(p.path("/w/repository/x"), "/w/repository/x");
        assert_eq!(p.path("--port"), "--port");
        assert_eq!(p.path("smollm2"), "smollm2");
        assert_eq!(Portable::none().path("/w/repo/gates/x"), "/w/repo/gates/x");
        // A gate at the root's first level has no checkout placeholder (`/` is never a prefix).
        let top = Portable::new(Path::new("/gates"), Path::new("/c"));
        assert_eq!(top.path("/etc/x"), "/etc/x");
    }
}
