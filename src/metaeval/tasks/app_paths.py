"""The files an agent names under a Harbor task's /app, found on the host without following
a link.

An agent writes `/app/<rel>` or `<rel>`; a bubblewrap room holds /app as a host directory, where
a symlink the agent made inside the sandbox may point anywhere on the host. So every part of
the path is checked: other absolute paths, `..` and NUL bytes are refused, and so is a symlink
anywhere on the way (`PathEscapeError`), or a directory where a file is named
(`WorkspaceError`).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from metaeval.sandbox.environment import PathEscapeError, WorkspaceError

APP_DIR = "/app"


def app_relative(path: str) -> PurePosixPath:
    """`path` relative to /app; refused for other absolute paths, `..`, NUL or /app itself."""
    if not path or "\x00" in path:
        raise WorkspaceError("empty path or NUL byte in the path")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        try:
            pure = pure.relative_to(APP_DIR)
        except ValueError:
            raise PathEscapeError(f"{path!r} is outside /app") from None
    if not pure.parts:
        raise WorkspaceError(f"{path!r} names /app itself, not a file")
    if ".." in pure.parts:
        raise PathEscapeError(f"{path!r} leaves /app ('..' is not allowed)")
    return pure


def app_file(app: Path, path: str, *, make_dirs: bool) -> tuple[Path, str]:
    """The host path of the agent's `path` in the host directory `app`, and how the agent
    sees it (/app/...). Missing directories on the way are made when `make_dirs`."""
    parts = app_relative(path).parts
    current = app
    for part in parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise PathEscapeError(f"{path!r} goes through a symlink ({_shown(app, current)})")
        if not current.exists() and make_dirs:
            current.mkdir()
        elif current.exists() and not current.is_dir():
            raise WorkspaceError(f"{_shown(app, current)} is not a directory")
    target = current / parts[-1]
    if target.is_symlink():
        raise PathEscapeError(f"{_shown(app, target)} is a symlink")
    if target.is_dir():
        raise WorkspaceError(f"{_shown(app, target)} is a directory")
    return target, _shown(app, target)


def write_app_file(app: Path, path: str, data: bytes) -> str:
    """Write `data` to the agent's `path` under the host directory `app` (see `app_file`);
    how the agent sees the file."""
    target, shown = app_file(app, path, make_dirs=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return shown


def _shown(app: Path, path: Path) -> str:
    return APP_DIR + "/" + path.relative_to(app).as_posix()
