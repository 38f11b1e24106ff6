"""Every command in the README's bash blocks runs as written, in order, from a fresh
directory holding the examples (as after a clone), with the venv's `metaeval` on PATH: the
setup, then each user journey (audit, build-and-find, improve) from writing the input to
reading the result.

Lines that need a hosted model, a placeholder path (BENCH_DIR, TB1_TASKS), the optional `mini`
extra, minutes of the local model, `make` (the setup itself) or a server that runs until
stopped (`metaeval view`) are left out; each left-out line is listed and checked to be one of
those kinds, so a new command cannot slip past untested.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_HERE = re.compile(
    r"BENCH_DIR|TB1_TASKS|openai/|anthropic/|mini|-m local/|^make |^metaeval view "
)
JOURNEYS = (
    "## Audit my benchmark",
    "## Compare agents with build-and-find",
    "## Evaluate an agent optimizer",
)


def readme_commands() -> list[str]:
    """Every command line of every bash block of the README, in order, comments removed."""
    text = (ROOT / "README.md").read_text()
    blocks = [part.split("```", 1)[0] for part in text.split("```bash\n")[1:]]
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def test_setup_names_the_venv_and_journeys_come_in_order() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Setup\n", 1)[1].split("\n## ", 1)[0]
    assert "source .venv/bin/activate" in section and ".venv/bin/metaeval" in section
    places = [text.index(f"\n{title}\n") for title in JOURNEYS]
    assert places == sorted(places) and text.index("\n## Setup\n") < places[0]
    for title in JOURNEYS:  # each from writing the input to reading the result
        body = text.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0]
        assert "**Write your input.**" in body and "read the result.**" in body.lower(), title


@pytest.mark.bwrap
@pytest.mark.timeout(1800)  # about 35 commands: 2-3 min alone, several times that on a busy machine
def test_using_it_commands_run_as_written(tmp_path: Path) -> None:
    commands = readme_commands()
    start = commands.index("source .venv/bin/activate")
    runnable = [c for c in commands[start + 1 :] if not NOT_HERE.search(c)]
    skipped = [c for c in commands if NOT_HERE.search(c)]
    assert all(c.startswith(("make ", "metaeval ")) for c in commands[:start]), commands[:start]
    assert len(runnable) >= 20 and len(skipped) <= 12, skipped
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "metaeval").write_text(f'#!/bin/sh\nexec {sys.executable} -m metaeval.cli "$@"\n')
    (shim / "metaeval").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shim}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT / "src"),
    }
    for command in runnable:
        result = subprocess.run(
            command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
        assert "Traceback" not in result.stderr, command
    assert (tmp_path / "runs" / "bf" / "report.html").is_file()
    assert (tmp_path / "runs" / "improve-demo" / "report.html").is_file()
    assert (tmp_path / "runs" / "bf-again" / "tables" / "README.md").is_file()
    assert (tmp_path / "runs" / "my-audit" / "score.json").is_file()
    assert (tmp_path / "runs" / "my-bf" / "labels" / "review.csv").is_file()
    # a manifest without `output` writes to ./runs like the other commands (view runs/ finds it)
    assert (tmp_path / "runs" / "my-improve" / "report.html").is_file()
    assert not (tmp_path / "my-improve" / "runs").exists()
