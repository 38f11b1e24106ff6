"""A container-like bubblewrap root for running Harbor task phases without Docker.

Harbor tasks assume a container: the working directory `/app`, the tests at `/tests`, the
reference solution at `/solution` and the verifier's output directory `/logs/verifier`
(where `test.sh` writes `reward.txt` or `reward.json`). This module builds a bwrap
command line whose root is a fresh tmpfs holding only:

- the sandbox policy's allowlisted system root (`policy.py`: `/usr`, `/bin`, `/lib*`,
  `/sbin`, a few `/etc` entries, a generated passwd), run as the unprivileged `sandbox` user;
- a private `/proc`, a minimal read-only `/dev`, an empty `/tmp` and `/dev/shm` of a fixed
  size (`metaeval.sandbox.storage`: a phase's /tmp is its task's `storage_mb`);
- the running Python installation, read-only at its own path, so that `python3` works even
  when it lives outside /usr (pyenv, a venv); first on PATH is a *stdlib-only* `python3`
  (a cached venv of the base interpreter without pip or site-packages, see `metaeval.sandbox.python_env`),
  the stand-in for a slim image's Python: a task never sees metaeval's own dependencies,
  so a missing module is found missing whatever extras the host has installed;
- a writable host directory at `/app` (a copy of the task's environment files),
  `/tests` and `/solution` read-only copies of the task's directories, and a writable host
  directory at `/logs/verifier`, so the reward file lands on the host. The copies hold only
  regular files: a symlink leading out of the task, or a FIFO, socket or device file, is
  left out (and said so on the phase's stderr), so the task cannot make the sandbox bind,
  copy or run a host file.

Nothing else of the host (home directories, /work, /root, /srv, /etc/shadow) is visible, and the network
is unshared unless allowed. Without a working bwrap nothing runs: `run_harbor_phase` then
returns a failed ExecResult saying why, and callers record the check as skipped.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from metaeval.sandbox.bwrap import (
    bwrap_available,
    bwrap_binary,
    fallback_forced,
    sandbox_env,
)
from metaeval.sandbox.policy import (
    DEFAULT_TMP_MB,
    Mount,
    SandboxSpec,
    bwrap_argv,
    running_python_prefixes,
)
from metaeval.sandbox.process import ExecResult, run_process
from metaeval.sandbox.python_env import sandbox_path, task_python_prefixes
from metaeval.sandbox.stdin_env import shell_with_env
from metaeval.sandbox.storage import tmp_size_mb, tmpfs_reason, tree_watch, with_tmpfs_check
from metaeval.tasks.limits import DEFAULT_MEMORY_MB, DEFAULT_STORAGE_MB
from metaeval.tasks.safe_files import remove_tree
from metaeval.tasks.toml_values import MAX_MEMORY_MB
from metaeval.tasks.tree_copy import copy_tree

APP_DIR = "/app"
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
VERIFIER_LOGS_DIR = "/logs/verifier"
AGENT_LOGS_DIR = "/logs/agent"


log = logging.getLogger(__name__)
DOCKER_BUILD_FILES = frozenset(
    {"Dockerfile", "docker-compose.yaml", "docker-compose.yml", ".dockerignore"}
)


def harbor_sandbox_unavailable() -> str | None:
    """Why Harbor phases cannot run here, or None when they can."""
    if fallback_forced():
        return "METAEVAL_NO_BWRAP is set; Harbor phases need bubblewrap (bwrap)"
    if bwrap_binary() is None:
        return "bubblewrap (bwrap) is not installed; Harbor phases need it"
    if not bwrap_available():
        return "bubblewrap (bwrap) cannot create a sandbox on this machine"
    return None


def python_prefixes() -> list[str]:
    """Resolved install prefixes of the running interpreter outside the bound system dirs."""
    return running_python_prefixes()


def build_harbor_root_argv(
    *,
    app_dir: Path,
    logs_dir: Path,
    tests_dir: Path | None = None,
    solution_dir: Path | None = None,
    network: bool = False,
    extra_ro_binds: Sequence[tuple[Path, str]] = (),
    extra_rw_binds: Sequence[tuple[Path, str]] = (),
    tmp_mb: int = DEFAULT_TMP_MB,
    status_fd: bool = False,
) -> list[str]:
    """The bwrap prefix for a container-like root; append the command argv.

    `app_dir` is bound writable at /app (the working directory), `logs_dir` writable at
    /logs/verifier; `tests_dir` / `solution_dir`, when given, read-only at /tests and
    /solution. `extra_ro_binds` adds (host path, sandbox path) pairs read-only,
    `extra_rw_binds` writable (an agent CLI's private home, its gateway socket). All
    namespaces are unshared (network too unless `network`), the sandbox dies with its
    parent and runs in a new session. /tmp is a tmpfs of `tmp_mb` MiB. The result ends
    with `--`. `status_fd`: see `policy.bwrap_argv` (for an argv `run_process` starts).
    """
    mounts = [Mount(_real(app_dir), APP_DIR, writable=True)]
    if tests_dir is not None:
        mounts.append(Mount(_real(tests_dir), TESTS_DIR))
    if solution_dir is not None:
        mounts.append(Mount(_real(solution_dir), SOLUTION_DIR))
    mounts.append(Mount(_real(logs_dir), VERIFIER_LOGS_DIR, writable=True))
    mounts += [Mount(_real(host), inside) for host, inside in extra_ro_binds]
    mounts += [Mount(_real(host), inside, writable=True) for host, inside in extra_rw_binds]
    prefixes = task_python_prefixes()
    spec = SandboxSpec(
        mounts=mounts,
        network=network,
        chdir=APP_DIR,
        python_prefixes=prefixes,
        dirs=(AGENT_LOGS_DIR,),
        tmp_mb=tmp_mb,
    )
    return bwrap_argv(spec, status_fd=status_fd)


def _real(path: Path) -> str:
    return os.path.realpath(path)


def run_harbor_phase(
    task_root: Path,
    work: Path,
    logs: Path,
    script: str,
    timeout_s: float,
    network: bool,
    *,
    mounts: Sequence[str] = ("tests", "solution"),
    memory_mb: int | None = DEFAULT_MEMORY_MB,
    env: dict[str, str] | None = None,
    memory_cgroup_mb: int | None = None,
    cpus: int | None = None,
    task_env: Mapping[str, str] | None = None,
    storage_mb: int = DEFAULT_STORAGE_MB,
) -> ExecResult:
    """Run `script` with bash in the container-like root of one Harbor task.

    `work` (host) becomes /app and `logs` (host) /logs/verifier; both must exist. `mounts`
    chooses which of the task's `tests/` and `solution/` directories are visible, so a
    phase sees what Harbor shows it (the oracle sees /solution, the verifier /tests).
    `memory_mb` is an address-space limit; `cpus`, when given, pins the phase to that many
    CPUs. `env` is added to bwrap's own environment (metaeval's choices only); `task_env`,
    the task's variables for this phase, reaches the script alone, through its stdin
    (`metaeval.sandbox.stdin_env`), never bwrap's environment or command line.
    `storage_mb` caps what the phase writes to /tmp, /app and /logs/verifier
    (`metaeval.sandbox.storage`); past it the phase fails with `limit_exceeded`.
    Returns a failed ExecResult (returncode None, explanation in stderr) when bubblewrap
    cannot be used.
    """
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        return ExecResult(returncode=None, stderr=f"metaeval: {reason}\n", sandboxed=False)
    root = Path(task_root)
    unknown = sorted(set(mounts) - {"tests", "solution"})
    if unknown:
        raise ValueError(f"unknown mounts {unknown}; expected 'tests' and/or 'solution'")
    staging = tempfile.mkdtemp(prefix="metaeval-mounts-")
    try:
        staged, notes = _stage_mounts(root, mounts, Path(staging))
        prefix = _root_argv(staged, Path(work), Path(logs), network, storage_mb)
        command, stdin = _phase_command(script, task_env)
        writable = {Path(work): APP_DIR, Path(logs): VERIFIER_LOGS_DIR}
        result = run_process(
            [*prefix, *command],
            stdin=stdin,
            cwd=Path(work),
            env=_bwrap_env(env),
            timeout_s=timeout_s,
            memory_mb=clamp_memory_mb(memory_mb),
            sandboxed=True,
            memory_cgroup_mb=memory_cgroup_mb,
            cpus=cpus,
            file_size_mb=storage_mb,
            watch=tree_watch(writable, storage_mb),
        )
    finally:
        remove_tree(staging)
    return _with_phase_notes(result, notes, storage_mb)


def _phase_command(
    script: str, task_env: Mapping[str, str] | None
) -> tuple[list[str], bytes | None]:
    """(argv, stdin) running `script` with bash (sh where there is none), the task's variables
    exported first through stdin, and the check that /tmp did not fill up."""
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    command, stdin = shell_with_env(shell, script, task_env)
    return with_tmpfs_check(command), stdin


def _bwrap_env(env: Mapping[str, str] | None) -> dict:
    """bwrap's own environment: the sandbox base, the root's PATH, /app, /tests, then `env`."""
    explicit = {"PATH": sandbox_path(), "PWD": APP_DIR, "TEST_DIR": TESTS_DIR, **(env or {})}
    return sandbox_env(explicit, home="/tmp")


def _root_argv(
    staged: dict[str, Path | None], work: Path, logs: Path, network: bool, storage_mb: int
) -> list[str]:
    """The bwrap prefix of a phase: /app and /logs/verifier writable, the staged copies bound."""
    return build_harbor_root_argv(
        app_dir=work,
        logs_dir=logs,
        tests_dir=staged["tests"],
        solution_dir=staged["solution"],
        network=network,
        tmp_mb=tmp_size_mb(storage_mb),
        status_fd=True,
    )


def _stage_mounts(
    root: Path, mounts: Sequence[str], staging: Path
) -> tuple[dict[str, Path | None], list[str]]:
    """Copies of the task directories a phase sees (`tests`, `solution`: None when not
    mounted or absent), and notes on what the copies left out."""
    staged: dict[str, Path | None] = {"tests": None, "solution": None}
    notes: list[str] = []
    for name in mounts:
        staged[name], left_out = stage_task_dir(root, name, staging)
        notes += left_out
    return staged, notes


def _with_phase_notes(result: ExecResult, notes: list[str], storage_mb: int) -> ExecResult:
    """A phase's result with a full /tmp reported as the limit it exceeded, and what the
    staged copies left out named in front of its stderr."""
    full = tmpfs_reason(result.returncode, tmp_size_mb(storage_mb))
    if full is not None and result.limit_exceeded is None:
        result = result.model_copy(update={"limit_exceeded": full})
    if notes:
        left = "".join(f"metaeval: left out of the sandbox: {note}\n" for note in notes)
        result = result.model_copy(update={"stderr": left + result.stderr})
    return result


def stage_task_dir(task_root: Path, name: str, staging: Path) -> tuple[Path | None, list[str]]:
    """A copy of the task's `name/` directory (tests, solution) to bind into the sandbox.

    The task's own directory is never bound: only its regular files are copied (see
    `metaeval.tasks.tree_copy.copy_tree`), so a symlink leading out of the task, or a FIFO,
    never reaches the sandbox. Returns (None, notes) when there is no such directory.
    """
    source = Path(task_root) / name
    if not os.path.lexists(source):
        return None, []
    target = staging / name
    notes = copy_tree(source, target, boundary=task_root, label=f"{name}/")
    return target, notes


def seed_app(task_root: Path, work: Path) -> list[str]:
    """Create `work` (the phase's /app) from the task's environment/ files, minus Docker
    build files; returns notes on what was left out (links out of the task, special files)."""
    work = Path(work)
    work.parent.mkdir(parents=True, exist_ok=True)
    environment = Path(task_root) / "environment"
    if not os.path.lexists(environment):
        work.mkdir()
        return []
    return copy_tree(
        environment,
        work,
        boundary=task_root,
        skip=lambda rel: rel.rsplit("/", 1)[-1] in DOCKER_BUILD_FILES,
        label="environment/",
    )


def clamp_memory_mb(memory_mb: int | None) -> int | None:
    """A memory limit setrlimit accepts: at most MAX_MEMORY_MB, at least 16 MB."""
    if memory_mb is None:
        return None
    return max(16, min(int(memory_mb), MAX_MEMORY_MB))
