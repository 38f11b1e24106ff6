"""Where the agent CLIs are: the project-local install, PATH, or beside this Python; what the
sandbox must show of an install; a fresh private HOME per run."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

TOOLS_DIR_ENV = "METAEVAL_TOOLS_DIR"
"""Directory whose ``node_modules/.bin`` holds the pinned CLIs (default: the checkout's .tools)."""
AGENT_HOMES_ENV = "METAEVAL_AGENT_HOMES"


def tools_dir() -> Path:
    """Where `make clis` installs the agent CLIs (``$METAEVAL_TOOLS_DIR`` or ``<repo>/.tools``)."""
    configured = os.environ.get(TOOLS_DIR_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(__file__).resolve().parents[4] / ".tools"


def resolve_binary(binary: str) -> Path | None:
    """Absolute path of a CLI: a path as given, else the project-local install (`tools_dir`),
    else PATH, else beside this Python (a console script such as ``mini``); None if absent."""
    if os.sep in binary:
        path = Path(binary).expanduser()
        ok = path.is_file() and os.access(path, os.X_OK)
        return path.resolve() if ok else None
    local = tools_dir() / "node_modules" / ".bin" / binary
    if local.is_file() and os.access(local, os.X_OK):
        return local.resolve()
    found = shutil.which(binary)
    if found:
        return Path(found).resolve()
    beside = Path(sys.executable).parent / binary  # a console script of this environment
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.absolute()
    return None


def binary_available(binary: str) -> bool:
    return resolve_binary(binary) is not None


def install_root(binary: Path) -> Path:
    """What the sandbox must show for `binary` to run: its outermost enclosing
    ``node_modules`` (a CLI's real binary may live in a sibling package), else its directory."""
    root = None
    for parent in binary.parents:
        if parent.name == "node_modules":
            root = parent
    if root is None and (binary.parent.parent / "pyvenv.cfg").is_file():
        root = binary.parent.parent  # a Python console script: its whole virtualenv
    return root or binary.parent


def private_home() -> Path:
    """A fresh writable HOME for one run, outside /tmp (codex refuses helper binaries under a
    temporary directory): under ``$METAEVAL_AGENT_HOMES``, else ~/.cache/metaeval/agent-homes."""
    base = os.environ.get(AGENT_HOMES_ENV)
    root = Path(base) if base else Path.home() / ".cache" / "metaeval" / "agent-homes"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="home-", dir=root))
