"""Build-and-find release: time to package a run and to verify the release.

Runs the reference example (scripted builders and finder, no model) with three restricted
views, then times `build_release` and `verify_release` in-process and prints the file count,
the tarball size and both durations. The verify figure includes recomputing every table,
comparing Parquet and CSV copies, the claims and the Croissant validation (mlcroissant reads
every record set).

Usage: python bench/buildfind_release.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from metaeval.protocols.buildfind.release.verify import verify_release
from metaeval.protocols.buildfind.release.write import build_release

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "buildfind-reference.yaml"
VIEWS = "views: [readme_only, source_only, tests_only]\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        config = base / "run.yaml"
        text = CONFIG.read_text().replace(
            "pack: buildfind-pack", f"pack: {CONFIG.parent / 'buildfind-pack'}"
        )
        config.write_text(text + VIEWS)
        run_dir = base / "run"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "metaeval.cli",
                "buildfind",
                "run",
                str(config),
                "-o",
                str(run_dir),
            ],
            check=True,
            capture_output=True,
        )
        build_s, verify_s = [], []
        for i in range(args.repeat):
            out = base / f"release-{i}"
            start = time.perf_counter()
            made = build_release(run_dir, out)
            build_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            problems = verify_release(out)
            verify_s.append(time.perf_counter() - start)
            assert not problems, problems
        size = made.archive.stat().st_size if made.archive else 0
        print(
            f"release of the reference run with 3 views: {made.files} files, tar.gz {size / 1e3:.0f} kB"
        )
        print(f"build_release: {statistics.median(build_s):.2f} s median of {args.repeat}")
        print(f"verify_release: {statistics.median(verify_s):.2f} s median of {args.repeat}")


if __name__ == "__main__":
    main()
