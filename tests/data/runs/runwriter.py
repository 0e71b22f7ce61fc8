"""The evidence writer both generators of this directory share (make_seed_runs.py, make_flm_pair.py): one
request's files (`NN.request.json`, `NN.reads.jsonl`, `NN.response.json`) from a reply's token pieces timed
to a first token and a decode rate, its `run.json` record, and a run's `run.json`, in servegate's run-directory
format (docs/evidence.md). Deterministic: the same arguments give the same bytes.
"""
import json
import os

# What every reconstructed run.json says of itself.
NOTE = "reconstructed from the published figures in shared/seed-runs.md; see tests/data/runs/README.md"


def chunk(obj):
    """One SSE event carrying `obj` as compact JSON."""
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


def reads_for(cid, model, pieces, ttft_ms, rate):
    """One read per SSE event: a role chunk at 0.9 x TTFT, token i at ttft + i * 1000/rate ms (so the decode
    rate (N - 1) / (t_last - t_first) is exactly `rate` for N = len(pieces) tokens), then the finish chunk,
    the usage chunk and [DONE]. Returns [(t_ms, text)]."""
    base = {"id": cid, "object": "chat.completion.chunk", "created": 1762790400, "model": model}
    out = [(round(ttft_ms * 0.9, 3), chunk(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}])))]
    gap = 1000.0 / rate
    t = ttft_ms
    for i, p in enumerate(pieces):
        t = ttft_ms + i * gap
        out.append((round(t, 3), chunk(dict(base, choices=[{"index": 0, "delta": {"content": p}, "finish_reason": None}]))))
    out.append((round(t + 0.4, 3), chunk(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))))
    n = len(pieces)
    out.append((round(t + 0.6, 3), chunk(dict(base, choices=[], usage={"prompt_tokens": 20, "completion_tokens": n, "total_tokens": 20 + n}))))
    out.append((round(t + 0.7, 3), "data: [DONE]\n\n"))
    return out


def write(path, text):
    """`text` to `path`, UTF-8, LF line ends."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def write_request(d, index, body, reads, ttft_ms):
    """Request `index`'s three files in run directory `d`: its body, its reads (from `reads_for`) and its
    response head (HTTP 200, an event stream, the head at 0.9 x TTFT)."""
    write(os.path.join(d, "%02d.request.json" % index), json.dumps(body, indent=2) + "\n")
    write(os.path.join(d, "%02d.reads.jsonl" % index), "".join(json.dumps({"t_ms": t, "text": s}, separators=(",", ":")) + "\n" for t, s in reads))
    meta = {"status": 200, "headers": {"content-type": "text/event-stream"}, "transport_error": None,
            "head_ms": round(ttft_ms * 0.9, 3), "end_ms": reads[-1][0]}
    write(os.path.join(d, "%02d.response.json" % index), json.dumps(meta, indent=2) + "\n")


def record(index, warmup, prompt_index, prompt, sent_utc, reads):
    """Request `index`'s record in run.json `requests[]` (no figures: judging measures the reads)."""
    return {
        "index": index, "warmup": warmup, "prompt_index": prompt_index, "repeat": 0, "prompt": prompt,
        "stream": True, "sent_utc": sent_utc, "http_status": 200,
        "transport_error": None, "body_bytes": sum(len(s.encode()) for _, s in reads),
        "body_truncated": False, "figures": None,
    }


def write_run(d, gate, started_utc, ended_utc, hostname, command, base_url, requests):
    """`run.json` of a complete run of gate `gate` (file `gates/<gate>.toml`) whose serve servegate started
    with `command` at `base_url`, holding `requests` (from `record`)."""
    run = {
        "schema": "servegate.run/1", "status": "complete", "gate": gate,
        "gate_file": "gates/%s.toml" % gate, "started_utc": started_utc,
        "ended_utc": ended_utc,
        "host": {"hostname": hostname, "os": "linux", "cpus": 16},
        "load_avg_start": None, "load_avg_end": None, "servegate_version": "reconstructed",
        "serve": {"mode": "command", "command": command,
                  "base_url": base_url, "pid": None, "setup": None, "ready_ms": None,
                  "ready_timeline": [], "failure": None, "version": None, "models": [], "stop": None},
        "requests": requests,
        "notes": [NOTE],
    }
    write(os.path.join(d, "run.json"), json.dumps(run, indent=2) + "\n")
