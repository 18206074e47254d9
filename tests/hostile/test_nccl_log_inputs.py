"""A job's NCCL log that is bad input, or built to burn CPU: read as NCCL prints it or refused in one line,
and in time linear in its size.

- two lines, ``GPU Direct RDMA Enabled for GPU a / HCA 0`` (a GPU NCCL prints in hex, ``%lx``, up to 2.23): an
  "internal error" (``int()`` of ``a`` where 2.24's rank is read);
- a 2 MiB log of 78,000 host names (one line each): a list membership test per line, then a host choice that
  scored every host against every other, ran past the 20 s deadline (38 s and more);
- the same size of ranks, network devices and connection lines of thousands of hosts beside a matrix.
"""

from __future__ import annotations

import json

from support.cli_util import ROOT, call, run
from support.limits import cpu_seconds_at_most

MATRIX = ROOT / "fixtures" / "nccl-runs-4gpu-vm" / "smi" / "topo-m.txt"
MIB = 1 << 20


def test_a_gpu_in_hex_is_read_as_nccl_prints_it(tmp_path):
    log = tmp_path / "two-lines.log"
    log.write_text("h:1:1 [0] NCCL INFO GPU Direct RDMA Enabled for GPU a / HCA 0 (distance 4 <= 5)\n"
                   "h:1:1 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 1 / HCA 0 (distance 4 <= 5)\n")
    p = run("pairs", "--json", "--from", log)
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 0 and json.loads(p.stdout)["nccl"]["log"]["host"] == "h"  # a log alone holds no GPU


def _many_hosts(size: int) -> str:
    out, n, i = [], 0, 0
    while n < size:
        line = f"h{i}:1:1 [0] NCCL INFO cudaDriverVersion 12040"
        out.append(line)
        n += len(line) + 1
        i += 1
    return "\n".join(out) + "\n"


def _many_ranks(size: int) -> str:
    out, n, i = [], 0, 0
    while n < size:
        h = f"host{i:06d}:1:1 [0] NCCL INFO "
        for line in (h + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
                     h + f"ncclCommInitRank comm 0x1 rank {i} nranks 99999 cudaDev 0 nvmlDev 0 busId "
                         f"{i % 200 + 1:x}000 commId 0x1 - Init START",
                     h + f"GPU Direct RDMA Enabled for GPU {i % 200 + 1:x}000 / HCA 1 (distance 4 <= 5)",
                     h + f"Channel 00/0 : {i}[0] -> {i + 1}[0] [send] via NET/IB/0/GDRDMA"):
            out.append(line)
            n += len(line) + 1
        i += 1
    return "\n".join(out) + "\n"


def _in_linear_time(tmp_path, name: str, text: str, *more, status: int) -> None:
    """The whole answer, with ``status``, for at most 20 s of CPU time (the work the log makes, whatever the
    machine's load)."""
    log = tmp_path / name
    log.write_text(text)
    with cpu_seconds_at_most(20):
        p = call("pairs", "--from", log, *more)
    assert p.returncode == status, (p.returncode, p.stderr[-400:])
    assert "Traceback" not in p.stderr and "findings:" in p.stdout, p.stderr[-400:]


def test_a_log_of_many_host_names_is_read_in_linear_time(tmp_path):
    _in_linear_time(tmp_path, "hosts.log", _many_hosts(2 * MIB), status=0)  # a log alone holds no GPU


def test_many_hosts_ranks_and_devices_beside_a_matrix(tmp_path):
    # 3: a matrix leaves the host's facts (peer memory, IOMMU) open
    _in_linear_time(tmp_path, "ranks.log", _many_ranks(2 * MIB), "--from", MATRIX, status=3)


def test_a_version_no_release_can_have_is_not_read_as_one(tmp_path):
    """The fuzz campaign's case: ``NCCL version 99999999999999999999.21.5`` matched the log's version line
    (any digits) and then failed NCCL's version grammar (three digits a part): an internal error. Such a line is
    not NCCL's version line; the log is read without a version."""
    log = tmp_path / "big-version.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL version 99999999999999999999.21.5+cuda12.4\n"
                   "h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n")
    p = run("pairs", "--json", "--from", log)
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["nccl"]["log"]["version"] is None
