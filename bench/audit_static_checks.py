"""Throughput of the AUDIT static checks on synthetic Harbor tasks.

Generates N small but realistic tasks (instruction ~1.5 KB, tests/test.sh, a ~2 KB pytest
module, solution/solve.sh + solve.py ~2 KB, environment/Dockerfile and requirements.txt,
task.toml), about half of them with one seeded defect per static check, builds them as
in-memory `LoadedTask`s and times `run_static_checks` on all of them. When the Harbor loader
(`metaeval.protocols.audit.task_view.load_task`) is present, the same tasks are also written to a temporary
directory and load + checks are timed. It also reports how many seeded defects were found,
how many findings appeared on clean tasks, and (when `metaeval.protocols.audit.evidence` is
present) how many findings' evidence verifies.

Last, the whole `metaeval audit run --static-only --no-execution` command on those tasks
(what a user sees: process start, worker processes, records, reports).

Usage: python bench/audit_static_checks.py [--tasks 1000] [--seed 7] [--repeat 3] [--per-check]

`--per-check` prints only the CPU time of the shared parse and of each registered check (to
compare two checkouts quickly: run it alternately from each).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path

from metaeval.engine.executor import available_cores
from metaeval.protocols.audit.static_checks import run_static_checks
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile

try:
    from metaeval.protocols.audit.task_view import load_task
except ImportError:  # the loader may not be there yet
    load_task = None
try:
    from metaeval.protocols.audit.evidence import verify_evidence
except ImportError:
    verify_evidence = None
try:
    from metaeval.protocols.audit.static.parse_cache import clear_parse_cache
except ImportError:  # an older checkout (--compare runs) parses every file every time

    def clear_parse_cache() -> None:
        pass


DOMAINS = [
    ("sales", "region", "amount", "total revenue per region"),
    ("sensors", "station", "reading", "mean reading per station"),
    ("orders", "customer", "price", "total spend per customer"),
    ("genes", "sample", "expression", "mean expression per sample"),
    ("trips", "driver", "distance", "total distance per driver"),
]
DEFECTS = (
    "inst-filename",  # INST-CONTRADICT
    "eval-filename",  # EVAL-MISMATCH (file names)
    "env-path",  # ENV-PATH
    "env-dep",  # ENV-DEP
    "no-reward",  # EVAL-MISMATCH (reward)
    "network",  # ENV-RESOURCE (network)
    "float-eq",  # EVAL-TOLERANCE
    "unknown-key",  # ENV-RESOURCE (task.toml)
    "merge-conflict",  # ENV-DEP (conflict markers in the Dockerfile)
    "copy-missing",  # ENV-PATH (COPY of a file not in the build context)
)
EXPECTED = {
    "inst-filename": ("INST-CONTRADICT", "Instruction names"),
    "eval-filename": ("EVAL-MISMATCH", "Tests read"),
    "env-path": ("ENV-PATH", "Hard-coded path"),
    "env-dep": ("ENV-DEP", "import"),
    "no-reward": ("EVAL-MISMATCH", "never writes"),
    "network": ("ENV-RESOURCE", "network"),
    "float-eq": ("EVAL-TOLERANCE", "float equality"),
    "unknown-key": ("ENV-RESOURCE", "ignores"),
    "merge-conflict": ("ENV-DEP", "merge conflict"),
    "copy-missing": ("ENV-PATH", "not in the build context"),
}


def make_files(index: int, rng: random.Random, defect: str | None) -> dict[str, str]:
    name, key, value, what = DOMAINS[index % len(DOMAINS)]
    year = 2015 + index % 10
    data = f"{name}.csv"
    out = f"{name}_summary.json"
    extra_cols = ", ".join(f"`col_{i}`" for i in range(rng.randint(3, 6)))
    instruction = f"""# {name.title()} summary #{index}

You are given a CSV file at `/app/{data}` with one row per record. The columns are
`{key}` (a string identifier), `{value}` (a decimal number) and `date` (ISO 8601), plus
auxiliary columns {extra_cols} that you can ignore.

## Task

Compute the {what} over all rows whose `date` falls in {year}. Rows with a missing or
non-numeric `{value}` must be skipped, and identifiers must be compared case-insensitively
(normalise them to lower case in the output).

Write the result to `/app/{out}` as a JSON object that maps each `{key}` to its value,
rounded to two decimals, with keys sorted alphabetically. Do not include entries with no
rows in {year}.

## Notes

- The file may contain a header row only; in that case write an empty JSON object.
- Use Python 3; the standard library, pandas and numpy are available.
- Do not modify `/app/{data}`.
- Your solution will be checked by automated tests that read `/app/{out}`.

Example: with the rows `a,1.5,{year}-01-02` and `A,2,{year}-03-04` the expected output is
{{"a": 3.5}}.

## Details

- Dates may carry a time part (`{year}-05-06T10:00:00`); only the year matters.
- Identifiers may have surrounding whitespace; strip it before grouping.
- Values can be negative; keep them. Values such as `1e3` are valid numbers.
- The output must be valid JSON (no trailing commas, no NaN); write it with UTF-8 encoding.
- Performance is not a concern: the file has at most a few hundred thousand rows.
"""
    test_sh = """#!/bin/bash
set -u
cd /app
python3 -m pytest -q -rA /tests/test_outputs.py | tee /logs/verifier/pytest.log
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
    test_py = f'''"""Tests for the {name} summary task."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

OUTPUT = Path("/app/{out}")
DATA = Path("/app/{data}")


def expected() -> dict:
    df = pd.read_csv(DATA)
    df["{value}"] = pd.to_numeric(df["{value}"], errors="coerce")
    df = df.dropna(subset=["{value}"])
    df = df[df["date"].astype(str).str.startswith("{year}")]
    df["{key}"] = df["{key}"].str.lower()
    grouped = df.groupby("{key}")["{value}"].sum()
    return {{k: round(float(v), 2) for k, v in sorted(grouped.items())}}


def test_output_exists():
    assert OUTPUT.exists(), "output file missing"


def test_output_is_json_object():
    data = json.loads(OUTPUT.read_text())
    assert isinstance(data, dict)


def test_keys_sorted_and_lower_case():
    data = json.loads(OUTPUT.read_text())
    assert list(data) == sorted(data)
    assert all(k == k.lower() for k in data)


def test_values_match():
    data = json.loads(OUTPUT.read_text())
    want = expected()
    assert set(data) == set(want)
    for k, v in want.items():
        assert math.isclose(data[k], v, rel_tol=1e-6, abs_tol=1e-9), k


def test_no_empty_or_padded_keys():
    data = json.loads(OUTPUT.read_text())
    assert all(k and k == k.strip() for k in data)


def test_values_are_rounded_numbers():
    data = json.loads(OUTPUT.read_text())
    for k, v in data.items():
        assert isinstance(v, (int, float)), k
        assert not math.isnan(v), k
        assert math.isclose(round(v, 2), v, abs_tol=1e-9), k


def test_only_year_{year}_counted():
    df = pd.read_csv(DATA)
    years = df["date"].astype(str).str[:4]
    if (years != "{year}").any():
        data = json.loads(OUTPUT.read_text())
        assert set(data) <= set(df["{key}"].str.strip().str.lower())


def test_total_close():
    data = json.loads(OUTPUT.read_text())
    total = float(np.sum(list(data.values())))
    assert total == pytest.approx(sum(expected().values()), rel=1e-6)
    assert abs(total - sum(expected().values())) < 1e-6
'''
    solve_sh = """#!/bin/bash
# Reference solution: runs solve.py and checks that it produced the output.
set -euo pipefail
cd /app
if [ ! -f /app/{data} ]; then
  echo "input /app/{data} is missing" >&2
  exit 1
fi
python3 /solution/solve.py --src /app/{data} --dst /app/{out}
test -s /app/{out}
echo "solution finished"
""".replace("{out}", out).replace("{data}", data)
    solve_py = f'''"""Reference solution: {what} for {year}."""

import argparse
import json
import logging
from pathlib import Path

import pandas as pd

SRC = Path("/app/{data}")
DST = Path("/app/{out}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", type=Path, default=SRC, help="input CSV")
    parser.add_argument("--dst", type=Path, default=DST, help="output JSON")
    parser.add_argument("--year", default="{year}", help="year to keep")
    return parser.parse_args(argv)


def clean(df: pd.DataFrame, year: str) -> pd.DataFrame:
    """Drop unusable rows, normalise identifiers, keep one year."""
    df = df.copy()
    df["{value}"] = pd.to_numeric(df["{value}"], errors="coerce")
    df = df.dropna(subset=["{value}"])
    df = df[df["date"].astype(str).str.strip().str[:4] == year]
    df["{key}"] = df["{key}"].astype(str).str.strip().str.lower()
    return df[df["{key}"] != ""]


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    logging.info("reading %s", args.src)
    df = pd.read_csv(SRC)
    if df.empty:
        DST.write_text("{{}}")
        return
    df["{value}"] = pd.to_numeric(df["{value}"], errors="coerce")
    df = df.dropna(subset=["{value}"])
    df = df[df["date"].astype(str).str.startswith("{year}")]
    df["{key}"] = df["{key}"].str.lower()
    grouped = df.groupby("{key}")["{value}"].sum()
    result = {{k: round(float(v), 2) for k, v in sorted(grouped.items())}}
    DST.write_text(json.dumps(result, indent=2, sort_keys=True))
    logging.info("wrote %d entries to %s", len(result), args.dst)


if __name__ == "__main__":
    main()
'''
    dockerfile = f"""FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends curl \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt /tmp/requirements.txt
RUN pip install --no-cache-dir -r /tmp/requirements.txt
COPY {data} /app/{data}
"""
    requirements = "pandas==2.2.2\nnumpy==1.26.4\npytest==8.3.2\n"
    task_toml = f"""version = "1.0"

[metadata]
author_name = "Bench"
difficulty = "easy"
category = "data-processing"
tags = ["{name}", "pandas"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
allow_internet = false
"""
    shipped = data
    if defect == "inst-filename":
        shipped = f"{name}_{year}.csv"
        solve_py = solve_py.replace(f"/app/{data}", f"/app/{name}_{year}.csv")
        solve_sh = solve_sh.replace(f"/app/{data}", f"/app/{name}_{year}.csv")
        test_py = test_py.replace(f'DATA = Path("/app/{data}")', "DATA = None")
        dockerfile = dockerfile.replace(f"COPY {data} /app/{data}", f"COPY {name}_{year}.csv /app/")
    elif defect == "eval-filename":
        test_py = test_py.replace(
            f'OUTPUT = Path("/app/{out}")', 'OUTPUT = Path("/app/output.json")'
        )
    elif defect == "env-path":
        solve_py = solve_py.replace(
            f'SRC = Path("/app/{data}")', f'SRC = Path("/home/dev/data/{data}")'
        )
    elif defect == "env-dep":
        test_py = test_py.replace("import pytest\n", "import pytest\nimport scipy.stats\n")
    elif defect == "no-reward":
        test_sh = test_sh.split("if [")[0] + 'echo "tests finished with $status"\n'
    elif defect == "network":
        test_sh = test_sh.replace(
            "cd /app\n", "cd /app\ncurl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"
        )
    elif defect == "float-eq":
        test_py += "\n\ndef test_first_value():\n    data = json.loads(OUTPUT.read_text())\n    assert data[sorted(data)[0]] == 3.5\n"
    elif defect == "unknown-key":
        task_toml = task_toml.replace("[agent]\n", "[agent]\nallow_internet = true\n")
    elif defect == "merge-conflict":
        dockerfile = dockerfile.replace(
            "WORKDIR /app\n",
            "<<<<<<< HEAD\nWORKDIR /app\n=======\nWORKDIR /workspace\n>>>>>>> feature\n",
        )
    elif defect == "copy-missing":
        shipped = f"raw_{data}"
    return {
        f"environment/{shipped}": "id,value\n1,4\n2,9\n",
        "instruction.md": instruction,
        "task.toml": task_toml,
        "tests/test.sh": test_sh,
        "tests/test_outputs.py": test_py,
        "solution/solve.sh": solve_sh,
        "solution/solve.py": solve_py,
        "environment/Dockerfile": dockerfile,
        "environment/requirements.txt": requirements,
    }


def role_of(path: str) -> str:
    if path == "instruction.md":
        return "instruction"
    head = path.split("/", 1)[0]
    return head if head in ("tests", "solution", "environment") else "other"


def in_memory(task_id: str, root: Path, files: dict[str, str]) -> LoadedTask:
    config = tomllib.loads(files["task.toml"])
    unknown = []
    if "allow_internet" in config.get("agent", {}):
        unknown.append("agent.allow_internet")
    return LoadedTask(
        task_id=task_id,
        root=root,
        config=config,
        unknown_keys=unknown,
        files=[
            TaskFile(
                path=p,
                role=role_of(p),  # type: ignore[arg-type]
                text=t,
                raw_bytes=len(t.encode()),
                delivered_bytes=len(t.encode()),
            )
            for p, t in files.items()
        ],
    )


def end_to_end(bench: Path, n: int) -> str:
    """`metaeval audit run --static-only --no-execution` as a user runs it (a fresh process,
    default jobs = cores, static cells in worker processes, records and reports written)."""
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "metaeval.cli", "audit", "run", str(bench)]
        argv += ["--static-only", "--no-execution", "-o", str(Path(out) / "run")]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: findings were reported
        return f"audit run --static-only: failed ({done.returncode}): {done.stderr[-500:]}"
    return (
        f"audit run --static-only --no-execution, {available_cores()} core(s), whole command: "
        f"{n / wall:.0f} tasks/s ({wall:.2f} s for {n} tasks)"
    )


def make_unique(task_id: str, files: dict[str, str]) -> dict[str, str]:
    """The same files with a comment naming the task in every script, so none repeats."""
    out = dict(files)
    for path, text in files.items():
        if path.endswith((".sh", ".py", "Dockerfile")):
            out[path] = text + f"# {task_id}\n"
    return out


def time_checks(tasks: list[LoadedTask], repeat: int, label: str, sizes: list[int]) -> list:
    """Best of `repeat` rounds of the checks on `tasks`, each from a cold parse cache."""
    best = best_cpu = float("inf")
    results: list = []
    for _ in range(repeat):
        clear_parse_cache()
        started, cpu = time.perf_counter(), time.process_time()
        results = [run_static_checks(task) for task in tasks]
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    print(
        f"tasks: {len(tasks)} (mean {sum(sizes) / len(sizes) / 1024:.1f} KiB of text each); "
        f"{label}: {len(tasks) / best:.0f} tasks/s ({best / len(tasks) * 1000:.2f} ms/task); "
        f"by CPU time (what a busy machine does not distort): {len(tasks) / best_cpu:.0f} tasks/s"
    )
    return results


def time_per_check(tasks: list[LoadedTask], repeat: int) -> None:
    """CPU ms per task of the shared parse and of each registered check (best of `repeat`
    rounds, cold parse cache): which check costs what, steady on a busy machine."""
    from metaeval.protocols.audit.static_checks import STATIC_CHECKS, TaskContext

    best: dict[str, float] = {}
    for _ in range(repeat):
        clear_parse_cache()
        contexts = [TaskContext(task) for task in tasks]
        cpu = time.process_time()
        for ctx in contexts:
            _ = (ctx.python_sources, ctx.shell_scripts, ctx.docker)
        best["(parse)"] = min(best.get("(parse)", float("inf")), time.process_time() - cpu)
        for check in STATIC_CHECKS:
            cpu = time.process_time()
            for ctx in contexts:
                check.run(ctx)
            spent = time.process_time() - cpu
            best[check.name] = min(best.get(check.name, float("inf")), spent)
    for name, spent in sorted(best.items(), key=lambda item: -item[1]):
        print(f"  {name:18} {spent / len(tasks) * 1000:6.2f} CPU ms/task")
    print(f"  {'total':18} {sum(best.values()) / len(tasks) * 1000:6.2f} CPU ms/task")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="timing rounds; best is shown")
    parser.add_argument(
        "--per-check",
        action="store_true",
        help="only the CPU time of the parse and of each check on unique files, then stop",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    specs: list[tuple[str, str | None, dict[str, str]]] = []
    for index in range(args.tasks):
        defect = rng.choice(DEFECTS) if rng.random() < 0.5 else None
        specs.append((f"task-{index:05d}", defect, make_files(index, rng, defect)))
    sizes = [sum(len(t) for t in files.values()) for _, _, files in specs]
    tasks = [in_memory(tid, Path("/nonexistent") / tid, files) for tid, _, files in specs]

    if args.per_check:
        unique_tasks = [
            in_memory(tid, Path("/nonexistent") / tid, make_unique(tid, files))
            for tid, _, files in specs
        ]
        time_per_check(unique_tasks, args.repeat)
        return
    results = time_checks(tasks, args.repeat, "checks alone", sizes)
    distinct = {
        kind: len({files[path] for _, _, files in specs for path in files if pick(path)})
        for kind, pick in (
            ("shell", lambda p: p.endswith(".sh")),
            ("Dockerfile", lambda p: p.endswith("Dockerfile")),
        )
    }
    print(
        f"  files repeat: {distinct['shell']} distinct shell scripts and "
        f"{distinct['Dockerfile']} distinct Dockerfiles among {len(tasks)} tasks "
        "(a parse is reused within a process)"
    )
    unique = [
        in_memory(tid, Path("/nonexistent") / tid, make_unique(tid, files))
        for tid, _, files in specs
    ]
    time_checks(unique, args.repeat, "checks alone, every file unique (no parse reused)", sizes)

    found = Counter()
    seeded = Counter()
    clean_findings: list[str] = []
    for (tid, defect, _), findings in zip(specs, results, strict=True):
        if defect is None:
            clean_findings += [f"{tid}: {f.subcategory} {f.title}" for f in findings]
            continue
        seeded[defect] += 1
        sub, needle = EXPECTED[defect]
        if any(f.subcategory == sub and needle in f.title for f in findings):
            found[defect] += 1
    recall = ", ".join(f"{d} {found[d]}/{seeded[d]}" for d in DEFECTS)
    print(f"seeded defects found: {recall}")
    print(f"findings on clean tasks: {len(clean_findings)}")
    for line in clean_findings[:5]:
        print("  ", line)

    if load_task is not None:
        with tempfile.TemporaryDirectory() as tmp:
            bench = Path(tmp) / "shared"
            for tid, _, files in specs:
                for path, text in files.items():
                    target = bench / tid / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text)
                (bench / tid / "environment" / f"{DOMAINS[0][0]}.csv").write_text("a,b\n")
            best_loaded = float("inf")
            loaded: list[LoadedTask] = []
            loaded_results = []
            for _ in range(args.repeat):
                clear_parse_cache()
                started = time.perf_counter()
                loaded = [load_task(bench / tid, bench_root=bench) for tid, _, _ in specs]
                loaded_results = [run_static_checks(task) for task in loaded]
                best_loaded = min(best_loaded, time.perf_counter() - started)
            print(
                f"load + checks: {len(specs) / best_loaded:.0f} tasks/s "
                f"({best_loaded / len(specs) * 1000:.2f} ms/task)"
            )
            if verify_evidence is not None:
                total = verified = 0
                for task, findings in zip(loaded, loaded_results, strict=True):
                    for finding in findings:
                        total += 1
                        verified += bool(verify_evidence(finding, task).evidence_verified)
                print(f"evidence verified (loaded tasks): {verified}/{total} findings")
            print(end_to_end(bench, len(specs)))
            unique_bench = Path(tmp) / "unique"
            for tid, _, files in specs:
                for path, text in make_unique(tid, files).items():
                    target = unique_bench / tid / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text)
                (unique_bench / tid / "environment" / f"{DOMAINS[0][0]}.csv").write_text("a,b\n")
            print(end_to_end(unique_bench, len(specs)) + ", every file unique")
    else:
        print("load + checks: skipped (metaeval.protocols.audit.task_view.load_task not available)")


if __name__ == "__main__":
    main()
