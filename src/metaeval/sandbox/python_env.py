"""The Python a sandboxed command sees: a stdlib-only venv of the base interpreter.

A task root or a workspace command gets `python3` from `bare_python` (made once per base
interpreter with `python -m venv --without-pip`, cached on disk), bound read-only with the
base installation it links to, never metaeval's own environment: a task never sees
metaeval's dependencies, so a missing module is found missing whatever the host installed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from metaeval.sandbox.policy import DEFAULT_PATH, under_system_dirs

BARE_PYTHON_ENV = "METAEVAL_BARE_PYTHON_DIR"  # where the stdlib-only venvs are cached

log = logging.getLogger(__name__)


def _base_interpreter() -> str:
    """The interpreter a venv (if any) was made from: the base installation's python."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


@functools.lru_cache(maxsize=1)
def bare_python() -> str | None:
    """A stdlib-only Python venv for task roots (cached on disk); None if it cannot be made.

    Made once per base interpreter with `python -m venv --without-pip` (no system
    site-packages), under $METAEVAL_BARE_PYTHON_DIR or ~/.cache/metaeval/bare-python.
    """
    base = _base_interpreter()
    key = hashlib.sha256(f"{base}\n{sys.version}".encode()).hexdigest()[:16]
    root = Path(
        os.environ.get(BARE_PYTHON_ENV)
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "metaeval/bare-python"
    )
    target = root / f"py{sys.version_info[0]}{sys.version_info[1]}-{key}"
    if (target / "bin" / "python3").exists():
        return str(target)
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".bare-", dir=root))
        venv_dir = staging / "venv"
        subprocess.run(
            [base, "-m", "venv", "--without-pip", str(venv_dir)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        with contextlib.suppress(OSError):  # another process may have made it first
            venv_dir.rename(target)
        shutil.rmtree(staging, ignore_errors=True)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("no stdlib-only python for task roots (%s); tasks see the host's", exc)
        return None
    return str(target) if (target / "bin" / "python3").exists() else None


def task_python_prefixes() -> list[str]:
    """What a task root binds of Python: the stdlib-only venv and the base installation it
    links to, never metaeval's own environment (nor the directory holding it)."""
    bare = bare_python()
    if bare is None:  # no venv could be made: the host's base interpreter, as it is
        return [p for p in [os.path.realpath(sys.base_prefix)] if not under_system_dirs(p)]
    base = os.path.realpath(sys.base_prefix)
    return [p for p in (base, bare) if not under_system_dirs(p)]


def sandbox_path() -> str:
    """PATH inside the root: the stdlib-only python first, then the usual system dirs."""
    bare = bare_python()
    if bare is not None:
        return f"{bare}/bin:{DEFAULT_PATH}"
    base_bin = os.path.join(os.path.realpath(sys.base_prefix), "bin")
    return f"{base_bin}:{DEFAULT_PATH}"
