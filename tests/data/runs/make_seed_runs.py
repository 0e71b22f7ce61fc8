#!/usr/bin/env python3
"""Rebuilds the two reconstructed evidence directories of the first user's NPU smoke runs
(tests/data/seed-runs.md) in servegate's run-directory format. Deterministic: rerunning it gives the same bytes.

    python3 tests/data/runs/make_seed_runs.py

Only the published figures are real (per-reply decode rates, median first token, the route strings in the
serve log); everything else (exact arrival times of each chunk, reply texts, token splits, log wording
around the route line) is invented to reproduce those figures. See README.md beside this script.
"""
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

PROMPTS = [
    "What is the capital of France? Answer with one word.",
    "Explain in two sentences why the sky is blue.",
    "Write a haiku about a river in spring.",
]
REPLIES = [
    ["Paris", "."],
    ["The", " sky", " looks", " blue", " because", " air", " molecules", " scatter", " short", " blue",
     " wavelengths", " of", " sunlight", " far", " more", " than", " long", " red", " ones", ".", " This",
     " scattered", " blue", " light", " reaches", " our", " eyes", " from", " every", " part", " of", " the",
     " sky", "."],
    ["Snow", "melt", " hurries", " on", ",", "\n", "bright", " water", " over", " round", " stones", ",", "\n",
     "willow", " buds", " listen", "."],
]

RUNS = {
    # name: (serve log, warmup [(ttft_ms, tok/s)], judged [(ttft_ms, tok/s)])
    "npu-rc-pass": (
        [
            "1bit serve 0.9.0 (rc-2026-11-07-c32, 80aceca152a909d5)",
            "model: /home/ci/models/npu/Qwen3-0.6B (Qwen3-0.6B-NPU2, Q4NX)",
            "device: npu /dev/accel/accel0 (AMD XDNA 2)",
            "kernels: 128 loaded from /home/ci/models/npu/Qwen3-0.6B/kernels",
            "decode: on the private route dx",
            "listening on http://127.0.0.1:39181",
        ],
        [(512.0, 80.2), (281.0, 83.0), (290.0, 81.5)],
        [(262.0, 98.4), (277.0, 84.4), (301.0, 82.1)],
    ),
    "npu-perop-fail": (
        [
            "1bit serve 0.9.0-dev (main, built without the private route)",
            "model: /home/ci/models/npu/Qwen3-0.6B (Qwen3-0.6B-NPU2, Q4NX)",
            "device: npu /dev/accel/accel0 (AMD XDNA 2)",
            "decode: private route not built in; using per-op forward",
            "listening on http://127.0.0.1:39181",
        ],
        [(1402.0, 1.8), (1090.0, 2.0), (1075.0, 1.9)],
        [(1040.0, 1.9), (1063.0, 2.1), (1101.0, 1.9)],
    ),
}


def chunk(obj):
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


def reads_for(index, pieces, ttft_ms, rate):
    """One read per SSE event. Token i arrives at ttft + i * 1000/rate ms, so the decode rate
    (N - 1) / (t_last - t_first) is exactly `rate` for N = len(pieces) tokens."""
    cid = "chatcmpl-seed%02d" % index
    base = {"id": cid, "object": "chat.completion.chunk", "created": 1762790400, "model": "Qwen3-0.6B"}
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
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    gate = open(os.path.join(REPO, "gates", "npu-serve-smoke.toml"), encoding="utf-8").read()
    for name, (log, warmup, judged) in RUNS.items():
        d = os.path.join(HERE, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        write(os.path.join(d, "gate.toml"), gate)
        write(os.path.join(d, "serve.log"), "\n".join(log) + "\n")
        requests = []
        plan = [(True, i, w) for i, w in enumerate(warmup)] + [(False, i, j) for i, j in enumerate(judged)]
        for index, (is_warmup, p, (ttft, rate)) in enumerate(plan):
            body = {
                "model": "~/models/npu/Qwen3-0.6B".replace("~", "/home/ci"),
                "messages": [{"role": "user", "content": PROMPTS[p]}],
                "max_tokens": 96,
                "temperature": 0.0,
                "stream": True,
                "stream_options": {"include_usage": True},
                "chat_template_kwargs": {"enable_thinking": False},
            }
            write(os.path.join(d, "%02d.request.json" % index), json.dumps(body, indent=2) + "\n")
            reads = reads_for(index, REPLIES[p], ttft, rate)
            write(os.path.join(d, "%02d.reads.jsonl" % index), "".join(json.dumps({"t_ms": t, "text": s}, separators=(",", ":")) + "\n" for t, s in reads))
            meta = {"status": 200, "headers": {"content-type": "text/event-stream"}, "transport_error": None,
                    "head_ms": round(ttft * 0.9, 3), "end_ms": reads[-1][0]}
            write(os.path.join(d, "%02d.response.json" % index), json.dumps(meta, indent=2) + "\n")
            requests.append({
                "index": index, "warmup": is_warmup, "prompt_index": p, "repeat": 0, "prompt": PROMPTS[p],
                "stream": True, "sent_utc": "2026-11-10T14:0%d:00Z" % index, "http_status": 200,
                "transport_error": None, "body_bytes": sum(len(s.encode()) for _, s in reads),
                "body_truncated": False, "figures": None,
            })
        run = {
            "schema": "servegate.run/1", "status": "complete", "gate": "npu-serve-smoke",
            "gate_file": "gates/npu-serve-smoke.toml", "started_utc": "2026-11-10T14:00:00Z",
            "ended_utc": "2026-11-10T14:02:00Z",
            "host": {"hostname": "npu-box (reconstructed)", "os": "linux", "cpus": 16},
            "load_avg_start": None, "load_avg_end": None, "servegate_version": "reconstructed",
            "serve": {"mode": "command", "command": ["1bit", "serve", "-m", "/home/ci/models/npu/Qwen3-0.6B", "--device", "npu", "--host", "127.0.0.1", "-p", "39181"],
                      "base_url": "http://127.0.0.1:39181", "pid": None, "setup": None, "ready_ms": None,
                      "ready_timeline": [], "failure": None, "version": None, "models": [], "stop": None},
            "requests": requests,
            "notes": ["reconstructed from the published figures in shared/seed-runs.md; see tests/data/runs/README.md"],
        }
        write(os.path.join(d, "run.json"), json.dumps(run, indent=2) + "\n")


if __name__ == "__main__":
    main()
