"""What the cgroup memory cap adds to one sandboxed command: the same `true` run in bubblewrap
with and without `memory_cgroup_mb` (create the cgroup, join it, read the OOM count, remove
it), interleaved. Prints the mean and p50 of each and the difference in milliseconds.

Usage: python bench/cgroup_overhead.py [--runs 100]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from metaeval.sandbox.cgroup import unavailable_reason
from metaeval.sandbox.workspace import Workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        raise SystemExit(f"no memory cgroup here: {reason}")
    ws = Workspace(Path(tempfile.mkdtemp(prefix="cgroup-bench-")))
    times: dict[str, list[float]] = {"plain": [], "cgroup": []}
    for _ in range(args.runs):
        for name, cap in (("plain", None), ("cgroup", 256)):
            start = time.perf_counter()
            result = ws.exec(["true"], memory_mb=None, memory_cgroup_mb=cap, timeout_s=30)
            times[name].append((time.perf_counter() - start) * 1000)
            assert result.ok, result
    for name, values in times.items():
        print(
            f"{name:7s} mean {statistics.mean(values):6.1f} ms  p50 {statistics.median(values):6.1f} ms"
        )
    added = statistics.median(times["cgroup"]) - statistics.median(times["plain"])
    print(f"cgroup cap adds {added:.1f} ms per command (p50 difference, {args.runs} runs each)")


if __name__ == "__main__":
    main()
