"""Harness overhead per evaluated task and tasks per minute for one candidate evaluation.

Materializes the toolloop target (model none: recipes only, so no model time is spent), adds
recipes for every terminal task, launches it over PACT and evaluates the bundled terminal suite
at concurrency 1 and 2. Everything measured is harness time: launch, sandboxed commands,
verifier runs, PACT round trips.

Usage: python bench/improve_evaluation.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
from pathlib import Path

from metaeval.examples import example_path
from metaeval.protocols.improve.init_target import init_target
from metaeval.protocols.improve.node_eval import SRC_DIR
from metaeval.protocols.improve.pact.launcher import launch
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.scripted_steps import improve
from metaeval.protocols.improve.suite_eval import evaluate_suite
from metaeval.protocols.improve.suites import load_suite_manifest


def _per_thread_clients(servers: list):
    """A client factory giving each worker thread its own server (one episode per server)."""
    local, claimed = threading.local(), itertools.count()

    def factory():
        if not hasattr(local, "server"):
            local.server = servers[next(claimed) % len(servers)]
        return local.server.client()

    return factory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    suite_dir = example_path("improve-suites/terminal")
    manifest = load_suite_manifest(suite_dir)
    task_ids = [t for split in manifest.splits.values() for t in split]
    tasks = [suite_dir / t for t in task_ids]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "target"
        init_target("toolloop", repo)
        improve(suite_dir, tuple(task_ids))(repo, {})  # recipes for every task: all should pass
        profile = SystemProfile(
            name="bench-target",
            command=[
                "python",
                "-m",
                "metaeval.protocols.improve.pact.server",
                "--policy",
                "target_agent.pact:make_policy",
                "--host",
                "{host}",
                "--port",
                "{port}",
            ],
            cwd=repo,
        )
        env = {"METAEVAL_TARGET_MODEL": "none", "PYTHONPATH": f"{repo}:{SRC_DIR}"}
        for concurrency in (1, 2):
            started = time.perf_counter()
            servers = [
                launch(profile, log_path=Path(tmp) / f"s{i}.log", extra_env=env)
                for i in range(concurrency)
            ]
            launch_s = time.perf_counter() - started
            factory = _per_thread_clients(servers)

            try:
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    result = evaluate_suite(
                        tasks, factory, concurrency=concurrency, work_root=Path(tmp) / "work"
                    )
                    elapsed = time.perf_counter() - t0
                    per_task = elapsed / len(tasks)
                    print(
                        f"concurrency {concurrency}: {len(tasks)} tasks in {elapsed:.2f} s "
                        f"({result.passed} passed, {result.failed} failed, {result.infra_errors} infra); "
                        f"{per_task * 1000:.0f} ms per task wall, {60 / per_task:.0f} tasks/min; "
                        f"server launch {launch_s:.2f} s"
                    )
            finally:
                for server in servers:
                    server.stop()


if __name__ == "__main__":
    main()
