"""What ending a trial's agent phase costs in a container (issue 43, item 1).

Before the tests a container room is restarted (every process of the agent phase killed),
/logs/verifier is made afresh and checked from outside (`ContainerRoom.end_agent_phase`).
This opens rooms of the offline base image (scripts/container-base-image.sh) in Podman,
leaves a detached process running in each, and prints the seconds `end_agent_phase` took:
median and worst of N rooms.

Usage: python bench/agent_phase_end.py [--rooms 5] [--image python:3.11-slim]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from metaeval.sandbox.container import find_engine
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import ContainerBackend


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", type=int, default=5)
    parser.add_argument("--image", default="python:3.11-slim")
    args = parser.parse_args()
    engine, why = find_engine("podman")
    if engine is None:
        print(f"no podman: {why}", file=sys.stderr)
        return 1
    backend = ContainerBackend(engine, args.image)
    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        task = Path(tmp) / "task"
        (task / "tests").mkdir(parents=True)
        (task / "tests" / "test.sh").write_text("echo 0 > /logs/verifier/reward.txt\n")
        (task / "task.toml").write_text('version = "1.0"\n')
        for n in range(args.rooms):
            scratch = Path(tmp) / f"room-{n}"
            scratch.mkdir()
            with backend.open(task, scratch, trial_limits({})) as room:
                room.exec("setsid sleep 600 >/dev/null 2>&1 &", "agent")
                started = time.monotonic()
                room.end_agent_phase()
                seconds.append(time.monotonic() - started)
    print(f"{backend.description}, {args.rooms} rooms")
    print(f"end_agent_phase: median {statistics.median(seconds):.2f} s, worst {max(seconds):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
