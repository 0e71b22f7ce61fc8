#!/usr/bin/env python3
"""Rebuilds the reconstructed evidence of the first user's A-B-B-A pair ticket (tests/data/seed-runs.md,
"The A-B-B-A pair": FastFlowLM 1.0.12 as theirs, the 1bit serve as ours, one model.q4nx, one device hold)
in the pair run layout the runner writes (pair.json, gate.toml, arm1-theirs/ ... arm4-theirs/, each an
ordinary run directory, written by runwriter.py, which make_seed_runs.py shares). Deterministic: rerunning it
gives the same bytes.

    python3 tests/data/runs/make_flm_pair.py

Two directories:
  flm-pair-pass/      the published ticket: decode ours 39.25 tok/s, theirs 45.57 (ratio 1.16); first token
                      ours 0.568 s, theirs 0.591 s; arm medians and spreads as published; the first request of
                      each of their arms slower (0.658 and 0.653 s).
  flm-pair-slowroute/ the same with ours on the slow per-op route (decode about 2 tok/s, first token about
                      1.06 s, as in the smoke ticket's per-op run): the decode ratio is then about 24x.

Only the published figures are real. Invented to reproduce them: each request's value within its arm (chosen
so every published median, range and spread re-derives, see PASS_ARMS), the arrival time of every chunk
(token i at TTFT + i x 1000/rate ms, so the decode rate (N - 1) / (t_last - t_first) is the value), the reply
texts and token split, the serve logs, the model file's hash and size, the load averages, and the times of day.
"""
import hashlib
import json
import os
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the evidence
from runwriter import reads_for, record, write, write_request, write_run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Explain in two sentences why the sky is blue.",
    "Write a haiku about a river in spring.",
]
REPLIES = [
    ["The", " capital", " of", " France", " is", " Paris", "."],
    ["The", " sky", " looks", " blue", " because", " air", " molecules", " scatter", " short", " blue",
     " wavelengths", " of", " sunlight", " far", " more", " than", " long", " red", " ones", ".", " This",
     " scattered", " blue", " light", " reaches", " our", " eyes", " from", " every", " part", " of", " the",
     " sky", "."],
    ["Snow", "melt", " hurries", " on", ",", "\n", "bright", " water", " over", " round", " stones", ",", "\n",
     "willow", " buds", " listen", "."],
]
ORDER = ["theirs", "ours", "ours", "theirs"]
MODEL = "~/.config/flm/models/Qwen3-1.7B-NPU2/model.q4nx"
MODEL_SHA = hashlib.sha256(b"reconstructed Qwen3-1.7B-NPU2 model.q4nx").hexdigest()
MODEL_BYTES = 1_289_748_480

# Per arm: [(ttft_ms, decode tok/s)] for prompts 0, 1, 2 (one repeat each).
# Decode: arm medians 45.43 / 39.276 (39.28) / 39.226 (39.23) / 45.91; spreads 45.62/45.08 = 1.012,
# 39.279/39.222 = 1.001, 39.318/39.201 = 1.003, 45.93/45.52 = 1.009; medians of the six: ours
# (39.226 + 39.276) / 2 = 39.251 (39.25, range 39.20-39.32), theirs (45.52 + 45.62) / 2 = 45.57 (45.08-45.93);
# ratio 45.57 / 39.251 = 1.161. First token: arm medians 591 / 567 / 573 / 591 ms; ours' six 566-578 with
# median 568, theirs' 591; the first request of their arms 658 and 653 ms.
PASS_ARMS = [
    [(658.0, 45.08), (591.0, 45.43), (589.0, 45.62)],
    [(566.0, 39.222), (567.0, 39.276), (568.5, 39.279)],
    [(567.5, 39.201), (573.0, 39.226), (578.0, 39.318)],
    [(653.0, 45.52), (591.0, 45.91), (590.0, 45.93)],
]
# Ours on the per-op forward (the smoke ticket's slow route: 1.9-2.1 tok/s, 1040-1101 ms first token).
SLOW_OURS = [
    [(1040.0, 1.9), (1063.0, 2.1), (1101.0, 1.9)],
    [(1052.0, 2.0), (1075.0, 1.9), (1090.0, 2.1)],
]

THEIRS_LOG = [
    "[FLM]  FastFlowLM v1.0.12",
    "[FLM]  Loading model: qwen3:1.7b (~/.config/flm/models/Qwen3-1.7B-NPU2)",
    "[FLM]  NPU power mode: performance",
    "[FLM]  Server listening on 127.0.0.1:{port}",
]
OURS_FAST_LOG = [
    "1bit serve 0.9.0 (rc-2026-11-07-c32, 80aceca152a909d5)",
    "model: ~/.config/flm/models/Qwen3-1.7B-NPU2 (Qwen3-1.7B-NPU2, Q4NX)",
    "device: npu /dev/accel/accel0 (AMD XDNA 2)",
    "decode: on the private route dx",
    "listening on http://127.0.0.1:{port}",
]
OURS_SLOW_LOG = [
    "1bit serve 0.9.0-dev (main, built without the private route)",
    "model: ~/.config/flm/models/Qwen3-1.7B-NPU2 (Qwen3-1.7B-NPU2, Q4NX)",
    "device: npu /dev/accel/accel0 (AMD XDNA 2)",
    "decode: private route not built in; using per-op forward",
    "listening on http://127.0.0.1:{port}",
]


def write_arm(d, arm, role, values, log, port, minute):
    os.makedirs(d)
    write(os.path.join(d, "serve.log"), "\n".join(l.replace("{port}", str(port)) for l in log) + "\n")
    requests = []
    for index, (ttft, rate) in enumerate(values):
        body = {
            "model": "qwen3:1.7b",
            "messages": [{"role": "user", "content": PROMPTS[index]}],
            "max_tokens": 96, "temperature": 0.0, "top_k": 1, "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"enable_thinking": False},
        }
        reads = reads_for("chatcmpl-a%d%s%02d" % (arm, role, index), "qwen3:1.7b", REPLIES[index], ttft, rate)
        write_request(d, index, body, reads, ttft)
        requests.append(record(index, False, index, PROMPTS[index], "2026-11-10T15:%02d:%02dZ" % (minute, 10 + index * 5), reads))
    if role == "theirs":
        inner = "FLM_MODEL_PATH=\"$(dirname \"$(dirname \"$1\")\")\" exec flm serve qwen3:1.7b --host \"$2\" --port \"$3\""
        command = ["sh", "-c", inner, "flm-serve", MODEL, "127.0.0.1", str(port)]
    else:
        inner = "exec 1bit serve -m \"$(dirname \"$1\")\" --device npu --host \"$2\" -p \"$3\""
        command = ["sh", "-c", inner, "1bit-serve", MODEL, "127.0.0.1", str(port)]
    write_run(
        d, "npu-pair-flm", "2026-11-10T15:%02d:00Z" % minute, "2026-11-10T15:%02d:30Z" % minute, "",
        command, "http://127.0.0.1:%d" % port, requests,
    )


def write_pair(name, arms_values, ours_log):
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    write(os.path.join(d, "gate.toml"), open(os.path.join(REPO, "gates", "npu-pair-flm.toml"), encoding="utf-8").read())
    arms = []
    for i, (role, values) in enumerate(zip(ORDER, arms_values)):
        arm = i + 1
        sub = "arm%d-%s" % (arm, role)
        log = THEIRS_LOG if role == "theirs" else ours_log
        write_arm(os.path.join(d, sub), arm, role, values, log, 39181 + i, i)
        runtime = "FastFlowLM flm serve (qwen3:1.7b)" if role == "theirs" else "1bit serve, NPU"
        arms.append({"arm": arm, "role": role, "runtime": runtime, "dir": sub})
    pair = {
        "schema": "servegate.pair/1", "status": "complete", "gate": "npu-pair-flm",
        "gate_file": "gates/npu-pair-flm.toml", "started_utc": "2026-11-10T15:00:00Z",
        "ended_utc": "2026-11-10T15:00:38Z", "host": {"hostname": "", "os": "linux", "cpus": 16},
        "load_avg_start": [0.42, 0.37, 0.31], "load_avg_end": [1.08, 0.52, 0.36], "order": ORDER,
        "model_file_ours": MODEL, "model_file_theirs": MODEL, "model_sha256": MODEL_SHA,
        "model_bytes": MODEL_BYTES, "model_sha256_after": MODEL_SHA, "failure": None, "arms": arms,
    }
    write(os.path.join(d, "pair.json"), json.dumps(pair, indent=2) + "\n")


def main():
    write_pair("flm-pair-pass", PASS_ARMS, OURS_FAST_LOG)
    slow = [PASS_ARMS[0], SLOW_OURS[0], SLOW_OURS[1], PASS_ARMS[3]]
    write_pair("flm-pair-slowroute", slow, OURS_SLOW_LOG)


if __name__ == "__main__":
    main()
