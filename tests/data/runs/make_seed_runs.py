#!/usr/bin/env python3
"""Rebuilds the two reconstructed evidence directories of the first user's NPU smoke runs
(tests/data/seed-runs.md) in servegate's run-directory format (the files written by runwriter.py, which
make_flm_pair.py shares). Deterministic: rerunning it gives the same bytes.

    python3 tests/data/runs/make_seed_runs.py

Only the published figures are real (per-reply decode rates, median first token, the route strings in the
serve log); everything else (exact arrival times of each chunk, reply texts, token splits, log wording
around the route line) is invented to reproduce those figures. See README.md beside this script.
"""
import os
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the evidence
from runwriter import reads_for, record, write, write_request, write_run  # noqa: E402

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
            reads = reads_for("chatcmpl-seed%02d" % index, "Qwen3-0.6B", REPLIES[p], ttft, rate)
            write_request(d, index, body, reads, ttft)
            requests.append(record(index, is_warmup, p, PROMPTS[p], "2026-11-10T14:0%d:00Z" % index, reads))
        write_run(
            d, "npu-serve-smoke", "2026-11-10T14:00:00Z", "2026-11-10T14:02:00Z", "npu-box (reconstructed)",
            ["1bit", "serve", "-m", "/home/ci/models/npu/Qwen3-0.6B", "--device", "npu", "--host", "127.0.0.1", "-p", "39181"],
            "http://127.0.0.1:39181", requests,
        )

if __name__ == "__main__":
    main()
