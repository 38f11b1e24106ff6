"""`metaeval doctor`'s rows for the agent CLIs: where each is, its version, and a live run
on a gateway whose scripted model answers at once."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

DOCTOR_REPLY = "metaeval-doctor-ok"


def cli_version(binary: Path) -> str:
    """What `binary --version` prints (first line), or why it could not be run."""
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run: {exc}"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return lines[0] if lines else f"exit code {done.returncode}"


def live_check(name: str) -> tuple[bool, str]:
    """Run CLI agent `name` once, sandboxed, on a gateway whose scripted model answers at once."""
    from metaeval.agents.cli import CLI_ADAPTERS
    from metaeval.agents.types import Limits, Task
    from metaeval.gateway.server import Gateway
    from metaeval.models.scripted import ScriptedModel
    from metaeval.sandbox.workspace import Workspace

    reply = DOCTOR_REPLY
    if name == "mini-swe-agent":  # text mode: its reply must be a command, here the submit one
        reply = "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
    model = ScriptedModel(lambda request: reply, name="scripted/doctor")
    with (
        tempfile.TemporaryDirectory(prefix="metaeval-doctor-") as tmp,
        Gateway(model, port=None) as gw,  # the CLI gets a socket (and token) of its own
    ):
        task = Task(id="doctor", instruction="Reply with one word.")
        result = CLI_ADAPTERS[name](gateway=gw).run(
            task, Workspace(Path(tmp)), Limits(time_limit_s=120)
        )
        calls = sum(1 for r in gw.exchanges.snapshot() if r.get("kind") == "completion")
    ok = result.status == "ok" and calls >= 1
    if name != "mini-swe-agent":
        ok = ok and (result.submission or "").strip() == DOCTOR_REPLY
    detail = f"live check via gateway: {result.status}, {calls} model call(s), {result.wall_clock_s:.1f}s"
    if not ok and result.error:
        detail += f" ({result.error[:200]})"
    return ok, detail


def agent_cli_checks(live: bool = True) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) per agent CLI: where it is, its version, a live run."""
    from metaeval.agents.cli import CLI_ADAPTERS
    from metaeval.agents.cli.binaries import resolve_binary

    checks = []
    for name, adapter in CLI_ADAPTERS.items():
        label = f"{name} (optional)"
        binary = resolve_binary(adapter.default_binary)
        if binary is None:
            checks.append((label, False, f"not installed; install with {adapter.install_hint}"))
            continue
        if name == "mini-swe-agent":
            from importlib.metadata import version

            detail = f"mini-swe-agent {version('mini-swe-agent')} at {binary}"
        else:
            detail = f"{cli_version(binary)} at {binary}"
        if not live:
            checks.append((label, True, detail))
            continue
        ok, live_detail = live_check(name)
        checks.append((label, ok, f"{detail}; {live_detail}"))
    return checks


def container_engine_check() -> tuple[str, bool, str]:
    """Whether `audit run --sandbox auto` can build and run a task's Dockerfile here."""
    from metaeval.sandbox.container import find_engine

    engine, reason = find_engine("auto")
    label = "container engine (optional)"
    if engine is None:
        return (label, False, f"{reason}; tasks with a Dockerfile run in the bubblewrap stand-in")
    version = cli_version(Path(engine.binary))
    return (label, True, f"{version} at {engine.binary} (audit --sandbox auto builds task images)")


MISSING = ("not installed", "not found", "no container engine")


def status_text(name: str, passed: bool, detail: str) -> str:
    """The doctor's status cell: ok; FAIL (red) only for a required part; an optional part
    is `missing` (absent) or `not usable` (present but its check failed), in yellow."""
    if passed:
        return "[green]ok[/]"
    if "(optional)" not in name:
        return "[red]FAIL[/]"
    return "[yellow]missing[/]" if detail.startswith(MISSING) else "[yellow]not usable[/]"


def optional_summary(checks: list[tuple[str, bool, str]]) -> str | None:
    """One line naming the optional parts missing or not usable here, or None."""
    names = [n.removesuffix(" (optional)") for n, ok, _ in checks if not ok and "(optional)" in n]
    if not names:
        return None
    return f"optional, not available here: {', '.join(names)} (everything else works without them)"


def component_versions() -> list[tuple[str, str]]:
    """(component, version) of what metaeval found here, for `metaeval --version`: the agent
    CLIs, llama.cpp, the container engines, bubblewrap and git ('not found' when absent)."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor
    from importlib.metadata import PackageNotFoundError, version

    from metaeval.agents.cli import CLI_ADAPTERS
    from metaeval.agents.cli.binaries import resolve_binary

    def package(name: str) -> str:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return "not found"

    binaries: dict[str, Path | None] = {
        name: resolve_binary(adapter.default_binary)
        for name, adapter in CLI_ADAPTERS.items()
        if name != "mini-swe-agent"
    }
    for tool in ("podman", "docker", "bwrap", "git"):
        found = shutil.which(tool)
        binaries[tool] = Path(found) if found else None
    names = list(binaries)
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda b: cli_version(b) if b else "not found", binaries.values()))
    found_versions = dict(zip(names, answers, strict=True))
    rows = [(name, found_versions[name]) for name in binaries if name in CLI_ADAPTERS]
    rows.append(("mini-swe-agent", package("mini-swe-agent")))
    rows.append(("llama.cpp", package("llama-cpp-python")))
    rows += [(name, found_versions[name]) for name in ("podman", "docker", "bwrap", "git")]
    return rows
