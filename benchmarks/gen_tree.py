"""Realistic server topologies as sysfs trees (the layout Linux uses, config space included).

    python3 benchmarks/gen_tree.py OUT_DIR --gpus 8 --nics 8 --nvme 8 --sockets 2 [--nested]

Per socket: root ports, each with a switch; GPUs, NICs and NVMe spread over the
switches' downstream ports; with ``--nested``, a second switch level below each
top switch (the PEX88xxx/89xxx pattern of HGX boards). ``--chassis N`` adds a
composable-PCIe chassis of N devices behind one deep switch fabric.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the machines the tests build too
from builders.servers import build  # noqa: E402 - tests/builders


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--nics", type=int, default=8)
    ap.add_argument("--nvme", type=int, default=8)
    ap.add_argument("--sockets", type=int, default=2)
    ap.add_argument("--nested", action="store_true")
    ap.add_argument("--chassis", type=int, default=0)
    a = ap.parse_args()
    t = build(a.out, a.gpus, a.nics, a.nvme, a.sockets, a.nested, a.chassis)
    print(f"{a.out}: {len(t.funcs)} PCI functions")


if __name__ == "__main__":
    main()
