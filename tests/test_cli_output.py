"""What a user sees from the real `metaeval` command: help texts, --version, piped output,
messages. Every test runs the CLI as a subprocess with its output going to a pipe (not a
terminal), as it does in logs and CI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from metaeval import __version__
from metaeval.cli import app

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "examples" / "audit-bench"
BAD_HELP = [
    re.compile(r"--no-no-"),
    re.compile(r"\[default: no-"),
    re.compile(r"<(list|int|str|float|bool|path|text)[^>]*>", re.I),
    re.compile(r"\brange>"),
]


def cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
    )


def command_paths() -> list[tuple[str, ...]]:
    """Every command and group of the CLI, as argument tuples (the root is ())."""
    paths: list[tuple[str, ...]] = []

    def walk(command, prefix: tuple[str, ...]) -> None:
        paths.append(prefix)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return paths


def test_command_tree_is_complete() -> None:
    paths = command_paths()
    for expected in [("audit", "run"), ("audit", "score"), ("buildfind", "label"), ("improve", "run"), ("demo",)]:  # fmt: skip
        assert expected in paths
    assert len(paths) >= 18


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "metaeval")
def test_help_has_no_python_metavars_or_double_negatives(path: tuple[str, ...]) -> None:
    result = cli(*path, "--help")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Usage:" in text
    for pattern in BAD_HELP:
        assert not pattern.search(text), (pattern.pattern, text)


def test_flag_options_are_plain_flags_and_still_work(tmp_path: Path) -> None:
    text = cli("audit", "run", "--help").stdout
    assert "--no-execution" in text and "--static-only" in text
    assert "--no-static-only" not in text
    assert re.search(r"--concurrency\s+INTEGER \[x>=1\]", text)
    run = cli(
        "audit", "run", str(BENCH), "--static-only", "--no-execution", "--task", "word-count",
        "-o", str(tmp_path / "a"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert '"execution_checks": false' in (tmp_path / "a" / "manifest.json").read_text()


def test_version_option() -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == f"metaeval {__version__}"


def test_piped_output_does_not_wrap_at_80_columns(tmp_path: Path) -> None:
    run_dir = tmp_path / ("a-rather-long-directory-name-so-that-paths-pass-eighty-columns" * 2)
    result = cli("audit", "run", str(BENCH), "--static-only", "-o", str(run_dir), COLUMNS="")
    assert result.returncode == 0, result.stderr
    report_line = next(line for line in result.stdout.splitlines() if line.startswith("report:"))
    assert report_line == f"report: {run_dir / 'report.md'} and {run_dir / 'report.html'}"
    assert len(report_line) > 200
    summary = next(line for line in result.stdout.splitlines() if "findings on" in line)
    assert summary.endswith(", infra errors 0")
    # one line per finished cell while the step runs (the output is not a terminal)
    cells = [line for line in result.stderr.splitlines() if line.startswith("audit cells ")]
    assert len(cells) == 14 and cells[-1].startswith("audit cells 14/14: ")

    score = cli("audit", "score", str(run_dir), "--gold", str(BENCH / "gold.json"), "--judge", "category")  # fmt: skip
    assert score.returncode == 0, score.stderr
    table = [line for line in score.stdout.splitlines() if line.startswith("|")]
    assert table and all(line.endswith("|") for line in table)  # no row broken over lines
    assert max(len(line) for line in table) > 80
    header = next(line for line in table if line.startswith("| Row | Recall_A"))
    assert header.count("|") == 8


def test_first_run_does_not_claim_reuse_and_rerun_does(tmp_path: Path) -> None:
    run_dir = tmp_path / "a"
    first = cli("audit", "run", str(BENCH), "--static-only", "--task", "word-count", "-o", str(run_dir))  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "reused" not in first.stdout
    second = cli("audit", "run", str(BENCH), "--static-only", "--task", "word-count", "-o", str(run_dir))  # fmt: skip
    assert "resumed: 1 completed cell(s) reused" in second.stdout


def test_not_a_run_directory_message(tmp_path: Path) -> None:
    result = cli("audit", "report", str(tmp_path))
    assert result.returncode != 0
    assert "not a run directory of the audit protocol (no manifest.json)" in result.stderr
    assert "not a audit" not in result.stderr
    assert "Traceback" not in result.stderr
