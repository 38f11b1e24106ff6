"""Wall-clock time of `metaeval demo` in a fresh run directory: when each line of its output
appeared (the first one is what a new user waits for), and the total.

Runs `metaeval demo --run-dir DIR` (all parts, in the order `make demo` runs them) and prints
every output line with the seconds since start, then the total and the machine's load
average before and after (the local model's speed depends on it).

    .venv/bin/python bench/demo_time.py [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="metaeval-demo-bench-")) / "demo"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    print(f"run dir: {run_dir}; cores: {os.cpu_count()}; load before: {os.getloadavg()[0]:.1f}")
    started = time.monotonic()
    command = [sys.executable, "-m", "metaeval.cli", "demo", "--run-dir", str(run_dir)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"{time.monotonic() - started:7.1f} s  {line.rstrip()[:160]}", flush=True)
        code = proc.wait()
    total = time.monotonic() - started
    print(
        f"total {total:7.1f} s ({total / 60:.1f} min), exit {code}; load after: {os.getloadavg()[0]:.1f}"
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main())
