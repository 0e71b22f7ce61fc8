#!/usr/bin/env python3
"""Per-block spread of interleaved pair runs (gates/reference-regression.toml and its f32-KV fixture).

usage: scripts/regression-spread.py PAIR_RUN_DIR...
For each pair run directory: each arm's median client decode rate (judged requests, run.json figures), then
per A-B-B-A block (arms 1-4, 5-8, ...) the candidate/baseline ratio exp(mean(log ours) - mean(log theirs))
of the arm medians, and the run's ratio (median of the per-request values, ours over theirs). Python stdlib.
"""
import json, math, os, statistics, sys

def arm_values(arm_dir):
    run = json.load(open(os.path.join(arm_dir, "run.json")))
    return [r["figures"]["decode_tok_s"] for r in run["requests"]
            if not r["warmup"] and r.get("figures") and r["figures"].get("decode_tok_s")]

for d in sys.argv[1:]:
    arms = sorted((a for a in os.listdir(d) if a.startswith("arm")), key=lambda a: int(a[3:].split("-")[0]))
    meds, allv = [], {"ours": [], "theirs": []}
    for a in arms:
        role = a.split("-", 1)[1]
        v = arm_values(os.path.join(d, a))
        allv[role] += v
        meds.append((role, statistics.median(v)))
    blocks = []
    for i in range(0, len(meds) - 3, 4):
        b = meds[i:i + 4]
        lo = [math.log(m) for r, m in b if r == "ours"]
        lt = [math.log(m) for r, m in b if r == "theirs"]
        blocks.append(math.exp(statistics.mean(lo) - statistics.mean(lt)))
    overall = statistics.median(allv["ours"]) / statistics.median(allv["theirs"])
    print(f"{d}: arm medians {' '.join(f'{r[0]}{m:.1f}' for r, m in meds)}; "
          f"block ratios (candidate/baseline) {' '.join(f'{x:.3f}' for x in blocks)}; "
          f"run ratio {overall:.3f} (medians {statistics.median(allv['ours']):.1f} vs {statistics.median(allv['theirs']):.1f} tok/s)")
