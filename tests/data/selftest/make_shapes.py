#!/usr/bin/env python3
"""Writes the `servegate self-test` shapes (tests/data/selftest/*.shape), embedded in the binary by
src/run/selftest.rs. Each shape is one small evidence directory as one text bundle:

    # shape: <name>
    # kind: seed | <kind number of docs/pass-is-proof.md>
    # about: <one line>
    # expect: route=PASS rate=FAIL ...     (per assertion; or `evidence_error`, `spec_invalid`, `no_pass`)
    === gate.toml
    <file>
    === run.json
    <file>
    === 00.reads.jsonl
    ...

Timings are synthetic but exact (the judging table's builder: a role chunk, n token chunks spaced so the decode
rate is exactly the given tok/s, a finish chunk, usage, [DONE]). Rerun after editing: python3 make_shapes.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = [
    "What is the capital of France? Answer with one word.",
    "Why is the sky blue?",
    "A haiku, please.",
]
GATE = """[gate]
name = "npu-serve-smoke"
description = "self-test shape"
[serve]
command = ["1bit", "serve", "-m", "{model}", "-p", "{port}"]
[request]
model = "/models/Qwen3-0.6B"
max_tokens = 96
prompts = ["What is the capital of France? Answer with one word.", "Why is the sky blue?", "A haiku, please."]
%(request_extra)s[assert.route]
fast = %(fast)s
slow = "per-op forward"
[assert.rate]
floor_tok_s = %(floor)s
[assert.first_token]
limit_ms = 600
[assert.content]
%(extra)s"""
KNOWN = """[assert.known_answer]
prompt = "What is the capital of France? Answer with one word."
matches = "(?i)\\\\bparis\\\\b"
"""
FAST_LOG = "1bit serve: loading Qwen3-0.6B\nnpu: kernels loaded; decoding on the private route dx\nlistening on 127.0.0.1:8080\n"
SLOW_LOG = "1bit serve: loading Qwen3-0.6B\nnpu: private route unavailable, using per-op forward\nlistening on 127.0.0.1:8080\n"
BOTH_LOG = FAST_LOG + "npu: route lost after reload; per-op forward\n"
NEITHER_LOG = "1bit serve: loading Qwen3-0.6B\nlistening on 127.0.0.1:8080\n"
COLOUR_LOG = "1bit serve: loading Qwen3-0.6B\non the private route\n\x1b[33mper-op\x1b[0m forward (fallback)\n"


def ev(t, obj):
    return (t, "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n")


def stream(ttft, rate, n, pieces=None, finish="stop", usage=True, field="content", done=True):
    gap = 1000.0 / rate
    reads = [ev(round(ttft / 2, 3), {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]})]
    t = ttft
    for i in range(n):
        t = round(ttft + i * gap, 3)
        piece = pieces[i % len(pieces)] if pieces else " w%d" % i
        reads.append(ev(t, {"choices": [{"index": 0, "delta": {field: piece}}]}))
    if finish is not None:
        reads.append(ev(round(t + 1, 3), {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    if usage:
        reads.append(ev(round(t + 2, 3), {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": n, "total_tokens": 20 + n}}))
    if done:
        reads.append((round(t + 3, 3), "data: [DONE]\n\n"))
    return reads


def ok(ttft, rate, pieces=None):
    return stream(ttft, rate, 16, pieces)


PARIS = ["Paris", ".", " It", " is", " the", " capital", " of", " France", " and", " its", " largest", " city", " by", " far", " today", " too"]


def record(i, reads, warmup=False, prompt_index=None, http_status=200, transport_error=None, truncated=False, body_bytes=None):
    pi = i % 3 if prompt_index is None else prompt_index
    return {
        "index": i, "warmup": warmup, "prompt_index": pi, "repeat": 0, "prompt": PROMPTS[pi], "stream": True,
        "sent_utc": "2026-11-10T14:00:%02dZ" % i, "http_status": http_status, "transport_error": transport_error,
        "body_bytes": sum(len(text.encode()) for _, text in reads) if body_bytes is None else body_bytes,
        "body_truncated": truncated, "figures": None,
    }


def run_json(records, status="complete", failure=None):
    return {
        "schema": "servegate.run/1", "status": status, "gate": "npu-serve-smoke",
        "gate_file": "gates/npu-serve-smoke.toml", "started_utc": "2026-11-10T14:00:00Z",
        "ended_utc": "2026-11-10T14:02:00Z", "host": {"hostname": "self-test", "os": "linux", "cpus": 1},
        "load_avg_start": None, "load_avg_end": None, "servegate_version": "self-test",
        "serve": {"mode": "command", "command": ["1bit", "serve"], "base_url": "http://127.0.0.1:8080",
                  "pid": None, "setup": None, "ready_ms": 1000.0 if failure is None else None,
                  "ready_timeline": [], "failure": failure, "version": None, "models": [], "stop": "exit status 0"},
        "requests": records, "notes": ["servegate self-test shape"],
    }


def reads_jsonl(reads):
    return "".join(json.dumps({"t_ms": t, "text": text}, ensure_ascii=False) + "\n" for t, text in reads)


def shape(name, kind, about, expect, replies=None, log=FAST_LOG, known=False, floor="60.0", fast='"on the private route"',
          status="complete", failure=None, records=None, request_extra="", judge_with=None, reads_override=None,
          planned=None):
    replies = replies if replies is not None else []
    gate = GATE % {"extra": KNOWN if known else "", "floor": floor, "fast": fast, "request_extra": request_extra}
    recs = records if records is not None else [record(i, r) for i, r in enumerate(replies)]
    files = [("gate.toml", gate)]
    if judge_with is not None:
        files.append(("judge-with.toml", judge_with(gate)))
    run = run_json(recs, status, failure)
    if planned is not None:
        run["planned"] = planned  # a live run records its plan (repeats x prompts)
    files.append(("run.json", json.dumps(run, indent=2) + "\n"))
    if log is not None:
        files.append(("serve.log", log))
    for rec, reads in zip(recs, replies):
        text = reads_override.get(rec["index"]) if reads_override and rec["index"] in reads_override else reads_jsonl(reads)
        files.append(("%02d.reads.jsonl" % rec["index"], text))
    out = ["# shape: " + name, "# kind: " + str(kind), "# about: " + about, "# expect: " + expect]
    for fname, text in files:
        assert "\n=== " not in "\n" + text, fname
        out.append("=== " + fname)
        out.append(text if text.endswith("\n") else text + "\n")
    path = os.path.join(HERE, name + ".shape")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(out[:4]) + "\n" + "".join(x if x.startswith("=== ") is False else x + "\n" for x in out[4:]))
    return path


def fast3(known_first=False):
    first = ok(262.0, 98.4, PARIS) if known_first else ok(262.0, 98.4)
    return [first, ok(277.0, 84.4), ok(301.0, 82.1)]


ALL4 = "route=%s rate=%s first_token=%s content=%s"


def main():
    for f in os.listdir(HERE):
        if f.endswith(".shape"):
            os.remove(os.path.join(HERE, f))
    # --- the seed's judging table (tests/data/seed-runs.md, tests/judge_table.rs) ---
    shape("seed-release-candidate-fast-route", "seed", "the release candidate on the private route: 98.4, 84.4, 82.1 tok/s, 277 ms median",
          ALL4 % ("PASS", "PASS", "PASS", "PASS") + " known_answer=PASS", fast3(True), known=True)
    shape("seed-silent-fallback-per-op", "seed", "main without the private route: per-op forward, 1.9 tok/s, 1063 ms; answers fine",
          ALL4 % ("FAIL", "FAIL", "FAIL", "PASS"), [stream(1040.0, 1.9, 16), stream(1063.0, 2.1, 16), stream(1101.0, 1.9, 16)], log=SLOW_LOG)
    shape("seed-default-max-tokens-rerun", "seed", "fast route, replies at 53.3, 46.4, 50.0 tok/s: rate fails alone",
          ALL4 % ("PASS", "FAIL", "PASS", "PASS"), [ok(433.0, 53.3), ok(420.0, 46.4), ok(450.0, 50.0)])
    shape("seed-max-tokens-96-rerun", "seed", "96.6, 66.9, 48.8 tok/s: median 66.9 passes the 60 floor",
          ALL4 % ("PASS", "PASS", "PASS", "PASS"), [ok(446.0, 96.6), ok(440.0, 66.9), ok(450.0, 48.8)])
    shape("seed-log-names-both-routes", "seed", "a log naming both routes (a retry that fell back) is the slow route",
          "route=FAIL", fast3(), log=BOTH_LOG)
    shape("seed-log-names-neither-route", "seed", "a log naming neither route fails for want of evidence",
          "route=FAIL", fast3(), log=NEITHER_LOG)
    shape("seed-no-serve-log", "seed", "no serve.log in the evidence: route fails", "route=FAIL", fast3(), log=None)
    shape("seed-median-not-mean", "seed", "70, 70, 1.9 tok/s: mean 47.3, median 70 passes",
          "rate=PASS", [ok(262.0, 70.0), ok(277.0, 70.0), stream(301.0, 1.9, 16)])
    shape("seed-floor-edge-59-9", "seed", "every reply at 59.9 tok/s: under the 60 floor", "rate=FAIL",
          [ok(262.0, 59.9), ok(277.0, 59.9), ok(301.0, 59.9)])
    shape("seed-first-token-over-limit", "seed", "first tokens after 700, 720, 650 ms: over the 600 ms limit",
          ALL4 % ("PASS", "PASS", "FAIL", "PASS"), [ok(700.0, 98.4), ok(720.0, 84.4), ok(650.0, 82.1)])
    shape("seed-thinking-left-on", "seed", "all tokens of one reply went to reasoning_content: content fails",
          ALL4 % ("PASS", "PASS", "PASS", "FAIL"),
          [ok(262.0, 98.4), stream(250.0, 80.0, 96, None, "length", True, "reasoning_content"), ok(301.0, 82.1)])
    shape("seed-degenerate-reply", "seed", "one reply is '//////': content fails", "content=FAIL",
          [stream(262.0, 90.0, 6, ["/"]), ok(277.0, 84.4), ok(301.0, 82.1)])
    shape("seed-whitespace-only-reply", "seed", "one reply is only whitespace: content fails", "content=FAIL",
          [ok(262.0, 98.4), ok(277.0, 84.4), stream(262.0, 90.0, 3, [" ", "\n", " "])])
    shape("seed-missing-timings", "seed", "a one-token reply has no decode window: not measured (too few tokens to time), never a rate failure", "rate=PASS",
          [ok(262.0, 98.4), stream(262.0, 90.0, 1, ["Paris"]), ok(301.0, 82.1)])
    err = [(40.0, 'data: {"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}\n\n')]
    shape("seed-error-reply", "seed", "one error reply: content, rate and first token fail",
          ALL4 % ("PASS", "FAIL", "FAIL", "FAIL"), [ok(262.0, 98.4), err, ok(301.0, 82.1)])
    shape("seed-no-replies-at-all", "seed", "the run holds no request: everything fails but the route, indeterminate (a log line, no reply that took it)",
          ALL4 % ("INDETERMINATE", "FAIL", "FAIL", "FAIL"), [])
    shape("seed-serve-never-ready", "seed", "port in use: every assertion fails with the reason",
          ALL4 % ("FAIL", "FAIL", "FAIL", "FAIL"), [], failure="port_in_use: 127.0.0.1:8080 (pid 4242)")
    shape("seed-incomplete-evidence", "seed", "run.json still says running: nothing passes",
          ALL4 % ("FAIL", "FAIL", "FAIL", "FAIL"), fast3(), status="running")
    slow3 = [stream(900.0, 5.0, 16) for _ in range(3)]
    warm = slow3 + fast3()
    recs = [record(i, r, warmup=True, prompt_index=i) for i, r in enumerate(slow3)] + \
        [record(i + 3, r, prompt_index=i) for i, r in enumerate(fast3())]
    shape("seed-warmup-not-judged", "seed", "a slow warmup round (one request per prompt) is recorded, not judged",
          ALL4 % ("PASS", "PASS", "PASS", "PASS"), warm, records=recs, request_extra="warmup = 1\n")
    shape("seed-known-answer-wrong", "seed", "the known-answer prompt answered 'Lyon': known_answer fails", "known_answer=FAIL content=PASS",
          [ok(262.0, 98.4, ["Lyon"] + PARIS[1:]), ok(277.0, 84.4), ok(301.0, 82.1)], known=True)

    # --- one shape for each kind of false pass (docs/pass-is-proof.md) ---
    recs3 = [record(i, r) for i, r in enumerate(fast3())]
    shape("kind1-requests-never-sent", 1, "3 of 6 planned requests recorded (serve died; status complete): the figures fail",
          "rate=FAIL first_token=FAIL", fast3(), records=recs3, request_extra="repeats = 2\n", planned=6)
    cut = lambda ttft: stream(ttft, 100.0, 2, None, finish=None, usage=False, done=False)
    shape("kind2-cut-replies-never-feed-a-median", 2,
          "two replies cut after two fast chunks (no finish_reason, no [DONE]), the only complete one at 5 tok/s; floor 10",
          "rate=FAIL first_token=FAIL content=FAIL", [cut(5.0), stream(200.0, 5.0, 16), cut(5.0)], floor="10.0")
    interrupted = [record(i, r) for i, r in enumerate(fast3())]
    shape("kind3-interrupted-run", 3, "run.json says interrupted (SIGTERM mid-run): no verdict passes",
          "no_pass", fast3(), status="interrupted")
    burst = [(100.0, "".join(text for _, text in stream(0.0, 1e9, 20)[1:21])),
             (103.0, "".join(text for _, text in stream(0.0, 1e9, 40)[21:]))]
    burst = [(90.0, ev(0, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]})[1])] + burst
    shape("kind4-burst-flushed-stream", 4, "40 token chunks flushed in two reads 3 ms apart: no client decode rate, so no reply measured: undecided, never a pass",
          "rate=INDETERMINATE", [burst, burst, burst])
    bad = stream(262.0, 98.4, 4, ["Paris", " is", " not", " it"])
    bad[3] = (bad[3][0], 'data: {"choices":[{"index":0,"delta":{"content":" not"}}\n\n')
    shape("kind5-malformed-event", 5, "a broken-JSON event in the known-answer reply: content and known_answer fail, naming it",
          "content=FAIL known_answer=FAIL", [bad, ok(277.0, 84.4), ok(301.0, 82.1)], known=True)
    shape("kind6-coloured-slow-route-line", 6, "the fallback line wrapped in colour codes still counts as the slow route",
          "route=FAIL", fast3(), log=COLOUR_LOG)
    dead = [(3.0, 'data: {"error":{"code":500,"message":"upstream connect error","type":"server_error"}}\n\n')]
    shape("kind6-gateway-every-reply-failed", 6, "a gateway whose upstream is dead: the start-up line matches, every reply is an error; no reply took the route, so it never passes",
          ALL4 % ("INDETERMINATE", "FAIL", "FAIL", "FAIL"), [dead, dead, dead])
    backwards = fast3()
    bw = list(backwards[1])
    bw[5], bw[6] = (bw[6][0], bw[5][1]), (bw[5][0], bw[6][1])
    backwards[1] = bw
    shape("kind7-reads-out-of-order", 7, "a reads file whose times go backwards is corrupt evidence: refused, never passed",
          "no_pass", backwards)
    shape("kind8-empty-route-pattern", 8, "fast = \"\" matches every log: the spec is refused",
          "spec_invalid", fast3(), fast='""')
    capped = fast3()
    caprecs = [record(i, r) for i, r in enumerate(capped)]
    caprecs[2]["body_truncated"] = True
    shape("kind9-capped-body", 9, "a reply over the body cap (kept only its head): it never passes content",
          "content=FAIL", capped, records=caprecs)
    shape("kind10-setup-failed", 10, "the setup (provisioning) failed: nothing ran, every assertion fails",
          ALL4 % ("FAIL", "FAIL", "FAIL", "FAIL"), [], failure="setup_failed: provision-reference.sh exited with status 1")
    warm_only = fast3()
    wrecs = [record(i, r, warmup=True) for i, r in enumerate(warm_only)]
    shape("kind11-only-warmups-recorded", 11, "every recorded request is a warmup: nothing was judged, so nothing passes",
          "rate=FAIL first_token=FAIL content=FAIL", warm_only, records=wrecs, request_extra="warmup = 1\n")
    shape("kind12-rejudge-with-edited-gate", 12, "the release candidate re-judged with a gate raising the floor to 90 (`judge --gate`): rate fails",
          ALL4 % ("PASS", "FAIL", "PASS", "PASS"), fast3(),
          judge_with=lambda g: g.replace("floor_tok_s = 60.0", "floor_tok_s = 90.0"))


if __name__ == "__main__":
    main()
