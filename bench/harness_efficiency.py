"""Harness efficiency: how close `metaeval audit run` gets to the latency limit of a provider.

A fixed-latency OpenAI-compatible server (bench/latency_server.py, a separate process on
127.0.0.1) answers every chat request after exactly L seconds. N synthetic Harbor tasks are
audited with `openai/latency` at concurrency C, as a user would run it (a fresh `metaeval`
process per run, `--no-execution`). The physical limit of that run is N*L/C seconds, so

    efficiency = (N * L / C) / wall

where wall is the whole command, process start to exit. Also printed: the efficiency after
setup (wall measured from the first request's arrival at the server), setup (process start to
the first request), the CPU time the process used (user + system: the figure least disturbed
by other load on a shared machine), peak memory of the process (ru_maxrss), memory per call
slot (C calls in service; up to C more cells are prepared ahead), the most requests the
server ever had in service at once, and the connections that carried its requests.

metaeval's modules are byte-compiled first, as pip does when it installs a wheel: an editable
install on a machine with PYTHONDONTWRITEBYTECODE set (this one) otherwise compiles every
module from source in every process, about 0.15 s of setup and 0.7 s of CPU per run that a
user's installed copy never pays.

With `--inspect-venv PATH` the same load also goes through Inspect AI (`PATH/bin/inspect eval`
on a generated task of N samples, `--max-connections C`), side by side. That path is optional
and not exercised by the tests (Inspect is not installed here).

Usage: python bench/harness_efficiency.py [--latency 1.0] [--concurrency 1 8 32 128]
           [--tasks 256 1024] [--repeat 2] [--inspect-venv PATH] [--metaeval-src DIR]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from audit_static_checks import make_files  # noqa: E402


@dataclass
class Figures:
    harness: str
    tasks: int
    concurrency: int
    wall_s: float
    after_setup_s: float
    setup_s: float
    peak_rss_mib: float
    cpu_s: float
    peak_in_service: int
    requests: int
    connections: int
    ideal_s: float

    @property
    def efficiency(self) -> float:
        return self.ideal_s / self.wall_s

    @property
    def efficiency_after_setup(self) -> float:
        return self.ideal_s / self.after_setup_s


class Server:
    """The latency server as a child process; `url` ends in /v1."""

    def __init__(self, latency: float):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "latency_server.py"), "--latency", str(latency)],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"latency server did not start: {line!r}")
        self.root = f"http://127.0.0.1:{int(line.split()[1])}"
        self.url = self.root + "/v1"

    def stats(self) -> dict:
        with urllib.request.urlopen(self.root + "/stats", timeout=30) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def write_bench(root: Path, n: int) -> Path:
    """N small but realistic Harbor tasks (no seeded defects)."""
    rng = random.Random(7)
    bench = root / f"bench-{n}"
    for index in range(n):
        for path, text in make_files(index, rng, None).items():
            target = bench / f"task-{index:05d}" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return bench


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, float]:
    """(start epoch, wall s, peak RSS MiB, CPU s) of one child process; raises on failure."""
    # output goes to files, not pipes: a run prints a line per job, and a full pipe nobody
    # reads until the end would stall it
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        started_epoch = time.time()
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out_file, stderr=err_file)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out_file.seek(0)
        err_file.seek(0)
        out = out_file.read().decode(errors="replace")
        err = err_file.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}:\n{out[-2000:]}\n{err[-2000:]}")
    return started_epoch, wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def measure(
    harness: str,
    argv: list[str],
    env: dict[str, str],
    latency: float,
    n: int,
    c: int,
) -> Figures:
    server = Server(latency)
    try:
        env = {**env, "OPENAI_BASE_URL": server.url}
        argv = [a.replace("{BASE_URL}", server.url) for a in argv]
        start, wall, rss, cpu = run_measured(argv, env)
        events = server.stats()
    finally:
        server.close()
    ok = [e for e in events["events"] if e[2] == 200]
    if len(ok) < n:
        raise RuntimeError(f"{harness}: only {len(ok)} of {n} requests reached the server")
    first = min(e[0] for e in ok)
    return Figures(
        harness=harness,
        tasks=n,
        concurrency=c,
        wall_s=wall,
        after_setup_s=wall - (first - start),
        setup_s=first - start,
        peak_rss_mib=rss,
        cpu_s=cpu,
        peak_in_service=events["peak_in_service"],
        requests=len(events["events"]),
        connections=events["connections"],
        ideal_s=n * latency / c,
    )


def check_cells(run_dir: Path, n: int) -> None:
    """A run's figures count only if every cell of it ended ok (a broken worker pool or a
    refused request would otherwise look fast)."""
    cells = [json.loads(line) for line in (run_dir / "audits.jsonl").read_text().splitlines()]
    bad = [c for c in cells if c.get("status") != "ok"]
    if len(cells) != 2 * n or bad:
        sample = bad[0].get("error", "")[-500:] if bad else ""
        raise RuntimeError(
            f"{run_dir}: {len(cells)} cells for {n} tasks, {len(bad)} not ok: {sample}"
        )


def compile_metaeval(src: Path | None) -> None:
    """Byte-compile the metaeval package that the runs will import (see the module doc)."""
    if src is not None:
        package = src.resolve() / "metaeval"
    else:
        spec = importlib.util.find_spec("metaeval")
        assert spec is not None and spec.submodule_search_locations is not None
        package = Path(spec.submodule_search_locations[0])
    if not compileall.compile_dir(package, quiet=1):
        raise RuntimeError(f"byte-compiling {package} failed")


def metaeval_argv(bench: Path, run_dir: Path, c: int) -> list[str]:
    return [
        sys.executable, "-m", "metaeval.cli", "audit", "run", str(bench),
        "-m", "openai/latency", "--no-execution", "--concurrency", str(c), "-o", str(run_dir),
    ]  # fmt: skip


INSPECT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate


@task
def latency():
    return Task(dataset=[Sample(input=f"audit task {{i}}") for i in range({n})], solver=generate())
"""


def inspect_argv(venv: Path, task_file: Path, log_dir: Path, c: int) -> list[str]:
    return [
        str(venv / "bin" / "inspect"), "eval", str(task_file), "--model", "openai/latency",
        "--model-base-url", "{BASE_URL}", "--max-connections", str(c), "--log-dir", str(log_dir),
        "--display", "none",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per request (L)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--tasks", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeat", type=int, default=2, help="runs per cell (shared machine)")
    parser.add_argument("--inspect-venv", type=Path, default=None)
    parser.add_argument(
        "--metaeval-src", type=Path, default=None, help="measure another checkout's src/"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["OPENAI_API_KEY"] = "sk-bench-not-a-real-key"  # Inspect insists on a key
    env["NO_COLOR"] = "1"
    if args.metaeval_src is not None:
        env["PYTHONPATH"] = str(args.metaeval_src.resolve())
    compile_metaeval(args.metaeval_src)
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="harness-eff-") as tmp:
        root = Path(tmp)
        for n in args.tasks:
            bench = write_bench(root, n)
            task_file = root / f"inspect_{n}.py"
            task_file.write_text(textwrap.dedent(INSPECT_TASK.format(n=n)))
            for c in args.concurrency:
                for rep in range(args.repeat):
                    run_dir = root / f"run-{n}-{c}-{rep}"
                    runs = [("metaeval", metaeval_argv(bench, run_dir, c))]
                    if args.inspect_venv is not None:
                        logs = root / f"inspect-logs-{n}-{c}-{rep}"
                        runs.append(
                            ("inspect", inspect_argv(args.inspect_venv, task_file, logs, c))
                        )
                    for harness, argv in runs:
                        fig = measure(harness, argv, env, args.latency, n, c)
                        if harness == "metaeval":
                            check_cells(run_dir, n)
                        rows.append(fig)
                        print(
                            f"{fig.harness:8s} N={n:5d} C={c:4d} run {rep + 1}: "
                            f"wall {fig.wall_s:7.2f} s (ideal {fig.ideal_s:7.2f}) "
                            f"efficiency {fig.efficiency:.3f} "
                            f"(after setup {fig.efficiency_after_setup:.3f}); "
                            f"setup {fig.setup_s:.2f} s; CPU {fig.cpu_s:.2f} s; "
                            f"peak RSS {fig.peak_rss_mib:.0f} MiB "
                            f"({fig.peak_rss_mib / min(c, n):.2f} MiB per call slot); "
                            f"peak in service {fig.peak_in_service}; "
                            f"connections {fig.connections}",
                            flush=True,
                        )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                [
                    {
                        **fig.__dict__,
                        "efficiency": fig.efficiency,
                        "efficiency_after_setup": fig.efficiency_after_setup,
                    }
                    for fig in rows
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
