"""Messages that point to the next step: `doctor` reports optional parts that are absent as
missing (not a red FAIL) and checks the container engine; `--version` names the versions of
the CLIs, llama.cpp and the container engine it finds. Run through the real command line with
a PATH that holds exactly the programs a case needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from metaeval import __version__
from metaeval.agents.cli.doctor import optional_summary, status_text


def cli(*args: str, path_dir: Path, tools: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": str(path_dir),
        "METAEVAL_TOOLS_DIR": str(tools),
        "METAEVAL_DOCTOR_LIVE": "0",
        "COLUMNS": "250",
    }
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


BASE = ("git", "bwrap", "true", "sh")  # what the sandbox probe itself needs
NETWORK = ("slirp4netns", "nsenter", "ip")  # the sandbox's own network, where installed


def bin_dir(tmp_path: Path, *programs: str) -> Path:
    """A PATH directory holding links to these real programs (and BASE, NETWORK) only."""
    out = tmp_path / "bin"
    out.mkdir(exist_ok=True)
    extra = [n for n in NETWORK if shutil.which(n)]
    for name in dict.fromkeys([*BASE, *extra, *programs]):
        found = shutil.which(name)
        assert found, name
        (out / name).symlink_to(found)
    return out


def test_status_cells() -> None:
    assert status_text("git", True, "git version 2") == "[green]ok[/]"
    assert status_text("git", False, "not found") == "[red]FAIL[/]"
    absent = "not installed; install with `make clis`"
    assert status_text("codex (optional)", False, absent) == "[yellow]missing[/]"
    broken = "0.1 at /x; live check via gateway: error"
    assert status_text("codex (optional)", False, broken) == "[yellow]not usable[/]"
    checks = [("git", True, ""), ("codex (optional)", False, absent), ("a (optional)", True, "")]
    assert optional_summary(checks) == (
        "optional, not available here: codex (everything else works without them)"
    )
    assert optional_summary(checks[:1]) is None


def test_version_names_what_it_finds(tmp_path: Path) -> None:
    path_dir = bin_dir(tmp_path)
    fake = path_dir / "podman"  # a container engine that only answers --version
    fake.write_text("#!/bin/sh\necho 'podman version 9.8.7'\n")
    fake.chmod(0o755)
    result = cli("--version", path_dir=path_dir, tools=tmp_path / "no-tools")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"metaeval {__version__}"
    rows = dict(line.strip().split(": ", 1) for line in lines[1:])
    assert rows["podman"] == "podman version 9.8.7"
    assert rows["docker"] == "not found"
    assert rows["claude-code"] == rows["codex"] == rows["gemini-cli"] == "not found"
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    assert rows["git"] == git
    assert rows["bwrap"].startswith("bubblewrap ")
    import llama_cpp

    assert rows["llama.cpp"] == f"llama-cpp-python {llama_cpp.__version__}"


def test_doctor_reports_missing_optional_parts_without_fail(tmp_path: Path) -> None:
    path_dir = bin_dir(tmp_path)  # no podman, no docker, no agent CLIs
    result = cli("doctor", "--strict", path_dir=path_dir, tools=tmp_path / "no-tools")
    text = result.stdout
    assert "FAIL" not in text, text
    engine = next(line for line in text.splitlines() if "container engine (optional)" in line)
    assert "missing" in engine and "docker is not installed; podman is not installed" in engine
    assert "tasks with a Dockerfile run in the bubblewrap stand-in" in engine
    codex = next(line for line in text.splitlines() if "codex (optional)" in line)
    assert "missing" in codex and "not installed; install with `make clis`" in codex
    summary = next(line for line in text.splitlines() if line.startswith("optional, not avail"))
    for name in ("container engine", "claude-code", "codex", "gemini-cli"):
        assert name in summary
    # only optional parts are missing: --strict still passes
    assert result.returncode == 0, result.stderr


def test_doctor_names_a_working_engine(tmp_path: Path) -> None:
    if shutil.which("podman") is None:
        import pytest

        pytest.skip("podman not installed")
    path_dir = bin_dir(tmp_path, "podman")
    result = cli("doctor", path_dir=path_dir, tools=tmp_path / "no-tools")
    engine = next(line for line in result.stdout.splitlines() if "container engine" in line)
    version = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout
    assert " ok " in engine and version.strip() in engine
