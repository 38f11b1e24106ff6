"""Workspaces: one isolated directory per run, and command execution inside it (an
`metaeval.sandbox.environment.Environment`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from metaeval.sandbox.bwrap import SANDBOX_HOME, build_bwrap_argv, sandbox_env, use_bwrap
from metaeval.sandbox.environment import (
    MAX_READ_BYTES,
    PathEscapeError,
    ReadOnlyWorkspaceError,
    WorkspaceError,
)
from metaeval.sandbox.file_views import HostViews
from metaeval.sandbox.process import DEFAULT_MAX_OUTPUT_BYTES, ExecResult, run_process
from metaeval.tasks.safe_files import UnsafeFileError, read_regular

__all__ = ["PathEscapeError", "ReadOnlyWorkspaceError", "Workspace", "WorkspaceError", "exec_in"]

STRIPPED_DIR_NAMES = frozenset(
    {
        "target",
        "__pycache__",
        "node_modules",
        ".venv",
        "venv",
        "build",
        "dist",
        ".git",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
STRIPPED_DIR_SUFFIXES = (".egg-info",)
STRIPPED_FILE_SUFFIXES = (".pyc",)


def _is_stripped_dir(name: str) -> bool:
    return name in STRIPPED_DIR_NAMES or name.endswith(STRIPPED_DIR_SUFFIXES)


def _prepare_root(root: Path) -> Path:
    """Create `root` (parents too); refuse an existing file or non-empty directory."""
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise WorkspaceError(f"workspace root {root} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()):
        raise WorkspaceError(f"workspace root {root} already exists and is not empty")
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Workspace(HostViews):
    """A directory where one agent run reads, writes and executes.

    `read_only` workspaces refuse `write_text` and are bound read-only inside the sandbox.
    `stripped` lists the build/VCS paths left out by `read_only_clone`; `skipped` lists
    symlinks pointing outside the source (or dangling) and special files, not copied.
    """

    def __init__(
        self,
        path: Path,
        *,
        read_only: bool = False,
        stripped: Sequence[str] = (),
        skipped: Sequence[str] = (),
    ) -> None:
        path = Path(path)
        if not path.is_dir():
            raise WorkspaceError(f"workspace {path} is not a directory")
        self.path = path.resolve()
        self.read_only = read_only
        self.stripped = list(stripped)
        self.skipped = list(skipped)

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r}, read_only={self.read_only})"

    @classmethod
    def create(cls, root: Path, seed_from: Path | None = None) -> Workspace:
        """Make a fresh writable workspace at `root`, optionally seeded with a copy of a tree.

        `root` may exist only as an empty directory. The seed is copied as-is (symlinks kept
        as links, VCS and build outputs included) and made owner-writable.
        """
        seed = Path(seed_from) if seed_from is not None else None
        if seed is not None and not seed.is_dir():
            raise WorkspaceError(f"seed directory {seed} does not exist")
        path = _prepare_root(Path(root))
        if seed is not None:
            shutil.copytree(seed, path, symlinks=True, dirs_exist_ok=True)
            os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
            for dirpath, dirnames, filenames in os.walk(path):
                for name in [*dirnames, *filenames]:
                    entry = os.path.join(dirpath, name)
                    if not os.path.islink(entry):
                        os.chmod(entry, os.lstat(entry).st_mode | stat.S_IWUSR)
        return cls(path)

    @classmethod
    def read_only_clone(cls, source: Path, dest: Path) -> Workspace:
        """Copy `source` to `dest` without VCS data and build outputs, as a read-only workspace.

        Left out (and listed in `stripped`, as relative paths): directories named as in
        STRIPPED_DIR_NAMES or ending in .egg-info, and *.pyc files. Symlinks are never
        followed: one resolving inside `source` is recreated as a relative link to the same
        place in the clone; one leading outside (or dangling), and fifos, sockets and device
        files, are dropped and listed in `skipped`. Files become 0444 (0555 if executable)
        and directories 0555; enforcement comes from the sandbox's read-only bind, since
        root ignores mode bits.
        """
        src = Path(source)
        if not src.is_dir():
            raise WorkspaceError(f"clone source {src} is not a directory")
        src_real = os.path.realpath(src)
        dest_abs = os.path.realpath(dest)
        if _within(dest_abs, src_real):
            raise WorkspaceError(f"clone destination {dest} is inside its source {src}")
        path = _prepare_root(Path(dest))
        stripped: list[str] = []
        skipped: list[str] = []
        _copy_clean(src_real, str(path), src_real, str(path), "", stripped, skipped)
        _make_read_only(path)
        return cls(path, read_only=True, stripped=stripped, skipped=skipped)

    def resolve(self, rel: str | os.PathLike[str]) -> Path:
        """Absolute, symlink-free path of `rel` (relative or absolute) inside the workspace.

        Raises PathEscapeError when the path, after resolving '..' and symlinks, is outside.
        """
        candidate = Path(rel)
        if not candidate.is_absolute():
            candidate = self.path / candidate
        try:
            real = os.path.realpath(candidate)
        except (ValueError, OSError) as exc:
            raise PathEscapeError(f"invalid path {str(rel)!r}: {exc}") from exc
        if not _within(real, str(self.path)):
            raise PathEscapeError(f"path {str(rel)!r} is outside the workspace {self.path}")
        return Path(real)

    def write_text(self, rel: str | os.PathLike[str], content: str) -> Path:
        """Write `content` (UTF-8) to a file inside the workspace, creating parent dirs."""
        return Path(self.write_file(os.fspath(rel), content.encode("utf-8")))

    def write_file(self, path: str, data: bytes) -> str:
        """Write `data` to `path` inside the workspace (see `write_text`); the path written."""
        if self.read_only:
            raise ReadOnlyWorkspaceError(f"workspace {self.path} is read-only; cannot write {path}")
        target = self.resolve(path)
        if target == self.path or target.is_dir():
            raise WorkspaceError(f"{path!r} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return str(target)

    def read_file(self, path: str) -> bytes:
        """The bytes of the regular file `path` inside the workspace (links resolved inside
        it, never followed out; FIFOs and devices never opened), at most MAX_READ_BYTES."""
        target = self.resolve(path)
        try:
            return read_regular(
                target, self.path, max_bytes=MAX_READ_BYTES, follow_inside_links=False
            )
        except UnsafeFileError as exc:
            raise WorkspaceError(f"{path}: {exc}") from None

    def close(self) -> None:
        """Nothing to release: the directory stays until `remove`."""

    def list_files(self) -> list[str]:
        """Sorted POSIX-style relative paths of all non-directory entries (links not followed)."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.path):
            rel_dir = os.path.relpath(dirpath, self.path)
            names = list(filenames) + [d for d in dirnames if os.path.islink(Path(dirpath, d))]
            for name in names:
                rel = name if rel_dir == "." else os.path.join(rel_dir, name)
                found.append(Path(rel).as_posix())
        return sorted(found)

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float = 60,
        memory_mb: int | None = 2048,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        extra_ro_binds: Sequence[Path] = (),
        extra_rw_binds: Sequence[Path] = (),
        memory_cgroup_mb: int | None = None,
    ) -> ExecResult:
        """Run `command` with the workspace as working directory, sandboxed when possible.

        A string runs via `bash -c` (`sh -c` without bash); a sequence is an argv. Under
        bwrap the host is read-only, /tmp is private and empty, and the network is off
        unless `network`. The environment is scrubbed (see `sandbox_env`); HOME is /tmp.
        Everything the command started is killed when it returns or times out.
        `extra_ro_binds` / `extra_rw_binds` expose more host directories (e.g. an agent CLI's
        install directory, or a private writable HOME) at their own paths.
        `memory_cgroup_mb` caps real memory by cgroup (see `run_process`).
        """
        return exec_in(
            self.path,
            command,
            writable=not self.read_only,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            network=network,
            env=env,
            stdin=stdin,
            max_output_bytes=max_output_bytes,
            extra_ro_binds=extra_ro_binds,
            extra_rw_binds=extra_rw_binds,
            memory_cgroup_mb=memory_cgroup_mb,
        )

    def remove(self) -> None:
        """Delete the workspace directory, restoring write permission where needed."""
        for dirpath, _, _ in os.walk(self.path):
            with contextlib.suppress(OSError):
                os.chmod(dirpath, 0o755)
        shutil.rmtree(self.path, ignore_errors=True)


def _shell_argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
        return [shell, "-c", command]
    argv = [str(part) for part in command]
    if not argv:
        raise WorkspaceError("empty command")
    return argv


def exec_in(
    directory: Path,
    command: str | Sequence[str],
    *,
    writable: bool,
    timeout_s: float = 60,
    memory_mb: int | None = 2048,
    network: bool = False,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    extra_ro_binds: Sequence[Path] = (),
    extra_rw_binds: Sequence[Path] = (),
    memory_cgroup_mb: int | None = None,
) -> ExecResult:
    """Run `command` in `directory` through bwrap when usable, else as a plain subprocess."""
    directory = Path(directory).resolve()
    argv = _shell_argv(command)
    sandboxed = use_bwrap()
    if sandboxed:
        prefix = build_bwrap_argv(
            directory,
            writable=writable,
            network=network,
            extra_ro_binds=extra_ro_binds,
            extra_rw_binds=extra_rw_binds,
            status_fd=True,
        )
        argv = prefix + argv
    return run_process(
        argv,
        cwd=directory,
        env=sandbox_env(env, home=SANDBOX_HOME),
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        stdin=stdin,
        max_output_bytes=max_output_bytes,
        sandboxed=sandboxed,
        memory_cgroup_mb=memory_cgroup_mb,
    )


def _copy_clean(
    src_dir: str,
    dst_dir: str,
    src_root: str,
    dst_root: str,
    rel_dir: str,
    stripped: list[str],
    skipped: list[str],
) -> None:
    """Recursive copy for read_only_clone (see there for the rules)."""
    with os.scandir(src_dir) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        dst = os.path.join(dst_dir, entry.name)
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            if _is_stripped_dir(entry.name):
                stripped.append(rel)
            elif _within(real, src_root) and os.path.exists(real):
                mirrored = os.path.join(dst_root, os.path.relpath(real, src_root))
                os.symlink(os.path.relpath(mirrored, dst_dir), dst)
            else:
                skipped.append(rel)
        elif entry.is_dir(follow_symlinks=False):
            if _is_stripped_dir(entry.name):
                stripped.append(rel)
                continue
            os.mkdir(dst)
            _copy_clean(entry.path, dst, src_root, dst_root, rel, stripped, skipped)
        elif entry.is_file(follow_symlinks=False):
            if entry.name.endswith(STRIPPED_FILE_SUFFIXES):
                stripped.append(rel)
                continue
            shutil.copy2(entry.path, dst, follow_symlinks=False)
        else:
            skipped.append(rel)


def _make_read_only(root: Path) -> None:
    """chmod files 0444 (0555 when executable) and directories 0555, bottom-up."""
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            entry = os.path.join(dirpath, name)
            if os.path.islink(entry):
                continue
            executable = os.stat(entry).st_mode & 0o111
            os.chmod(entry, 0o555 if executable else 0o444)
        for name in dirnames:
            entry = os.path.join(dirpath, name)
            if not os.path.islink(entry):
                os.chmod(entry, 0o555)
    os.chmod(root, 0o555)
