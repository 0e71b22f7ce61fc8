# Writes k6-xk6-llm.json: k6's --out json envelopes as xk6-llm's client pushes them (see README.md beside).
# Constructed, not recorded: k6 with xk6-llm is built by xk6 with a Go toolchain, which this machine has not.
import json
from datetime import datetime, timedelta, timezone

t0 = datetime(2026, 12, 7, 6, 0, 0, tzinfo=timezone.utc)
seen = set()
out = []

def go_time(t, extra_ns):
    # Go's time.Time JSON: RFC 3339 with nanoseconds, trailing zeros dropped.
    frac = f"{t.microsecond * 1000 + extra_ns:09d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ("." + frac if frac else "") + "Z"

blocks = []  # (end, samples of one push), written in push order: by end time

def point(metric, mtype, contains, time, value, tags):
    blocks[-1][1].append((metric, mtype, contains, time, value, tags))

def emit(metric, mtype, contains, time, value, tags):
    if metric not in seen:
        seen.add(metric)
        out.append({"type": "Metric", "data": {"name": metric, "type": mtype, "contains": contains,
                    "thresholds": [], "submetrics": None}, "metric": metric})
    out.append({"metric": metric, "type": "Point", "data": {"time": time, "value": value, "tags": tags}})

tags = {"group": "", "model": "synthetic", "scenario": "default"}
blocks.append((t0, []))
point("vus", "gauge", "default", go_time(t0, 0), 2, {})
# Two VUs, three requests each: 16 tokens, the first at 40 ms (+ 0.3 ms per request), then 10 ms apart
# (+ 0.01 ms per gap and request); VU 2's third request fails (the serve refused the connection).
for vu in (1, 2):
    start = t0 + timedelta(milliseconds=vu * 0.5)
    for k in range(3):
        i = (vu - 1) * 3 + k
        if vu == 2 and k == 2:
            end = start + timedelta(milliseconds=1.25)
            blocks.append((end, []))
            point("llm_errors", "counter", "default", go_time(end, 123), 1, dict(tags, error_type="network"))
            break
        ttft = 40.0 + 0.3 * i
        itl = [10.0 + 0.01 * i] * 15
        duration = ttft + sum(itl) + 0.75
        end = start + timedelta(milliseconds=duration)
        t = go_time(end, 123)
        blocks.append((end, []))
        point("llm_requests", "counter", "default", t, 1, tags)
        point("llm_request_duration", "trend", "time", t, round(duration, 6), tags)
        point("llm_chunks_per_request", "trend", "default", t, 16, tags)
        point("llm_response_headers", "trend", "time", t, 1.5, tags)
        point("llm_ttft", "trend", "time", t, round(ttft, 6), tags)
        for g in itl:
            point("llm_itl", "trend", "time", t, round(g, 6), tags)
        point("llm_tpot", "trend", "time", t, round((duration - ttft) / 15, 6), tags)
        point("llm_prompt_tokens", "counter", "default", t, 12, tags)
        point("llm_completion_tokens", "counter", "default", t, 16, tags)
        it = {"group": "", "scenario": "default"}
        point("iterations", "counter", "default", t, 1, it)
        point("iteration_duration", "trend", "time", t, round(duration + 0.2, 6), it)
        start = end + timedelta(milliseconds=0.3)

for _, samples in sorted(blocks, key=lambda b: b[0]):
    for s in samples:
        emit(*s)
with open("k6-xk6-llm.json", "w") as f:
    for e in out:
        f.write(json.dumps(e, separators=(",", ":")) + "\n")
