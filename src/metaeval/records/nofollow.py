"""Writes inside a run directory that never follow a link.

A run directory may come from someone else (a shared or downloaded run). Any entry in it can
then be a symbolic link to a file of the user's (``.lock`` -> ``~/.bashrc``), so every file
metaeval writes, appends to or locks there is opened with ``O_NOFOLLOW``, and every directory
below the run directory is walked one component at a time, also without following links. A
link, a FIFO or a device where a file or directory is expected is refused with a `ConfigError`
naming it; nothing is written. The run directory itself (the path the user gave) is trusted.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from metaeval.errors import ConfigError, with_filename

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted under a record's name fails at once (ENXIO) or is refused
# by the regular-file check, rather than blocking; it changes nothing for a regular file
FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def refused(path: Path, what: str = "a regular file") -> ConfigError:
    """The error for an entry of a run directory that is a link (or not what it should be),
    met while reading or writing: the one rule for both."""
    try:
        kind = "a symbolic link" if stat.S_ISLNK(os.lstat(path).st_mode) else f"not {what}"
    except OSError:
        kind = f"not {what}"
    return ConfigError(
        f"is {kind}; metaeval never reads or writes through links or special files in a run "
        "directory (a shared run may point them anywhere): remove it, or use a copy of the "
        "run without links",
        file=str(path),
    )


def open_for_reading(path: Path) -> int | None:
    """A blocking read-only descriptor of the regular file `path`, never through a link and
    without blocking on a FIFO; None when it does not exist, `refused` when a link, FIFO or
    device stands in its place."""
    try:
        fd = os.open(path, os.O_RDONLY | FILE_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink; ENXIO: a FIFO without a writer
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise refused(path) from exc
        raise with_filename(exc, path) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refused(path)
    os.set_blocking(fd, True)
    return fd


def _relative(path: Path, root: Path) -> tuple[str, ...]:
    try:
        return path.relative_to(root).parts
    except ValueError:
        raise ValueError(f"{path} is not inside {root}") from None


def open_dir(path: Path, root: Path, *, create: bool = False) -> int:
    """A descriptor of directory `path`: `root` is opened as given, each component of `path`
    below it without following a link (and made when missing, with `create`)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    here = Path(root)
    try:
        for part in _relative(Path(path), Path(root)):
            here = here / part
            try:
                child = _open_subdir(fd, part, here)
            except FileNotFoundError as exc:
                if not create:
                    raise with_filename(exc, here) from exc
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:  # made meanwhile
                    pass
                except OSError as mkdir_error:  # a read-only or full file system
                    raise with_filename(mkdir_error, here) from mkdir_error
                child = _open_subdir(fd, part, here)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_subdir(dir_fd: int, name: str, path: Path) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError:
        _refuse_if_odd(dir_fd, name, path, stat.S_ISDIR, "a directory")
        raise


def _refuse_if_odd(
    dir_fd: int, name: str, path: Path, is_kind: Callable[[int], bool], what: str
) -> None:
    """Raise `refused` when `name` is a link or not of the expected kind."""
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except OSError:
        return
    if stat.S_ISLNK(mode) or not is_kind(mode):
        raise refused(path, what) from None


def open_in_dir(dir_fd: int, name: str, flags: int, path: Path, mode: int = 0o644) -> int:
    """os.open of `name` in an open directory without following a link; the result must be a
    regular file, else `refused` naming `path`."""
    try:
        fd = os.open(name, flags | FILE_FLAGS, mode, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError:
        _refuse_if_odd(dir_fd, name, path, stat.S_ISREG, "a regular file")
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refused(path)
    return fd


def open_file(path: Path, flags: int, mode: int = 0o644, *, root: Path | None = None) -> int:
    """os.open of `path` for writing, appending or locking, never through a link: its directory
    is walked from `root` (default: the directory itself, trusted) like `open_dir`."""
    path = Path(path)
    dir_fd = open_dir(path.parent, path.parent if root is None else Path(root))
    try:
        return open_in_dir(dir_fd, path.name, flags, path, mode)
    except OSError as exc:  # a read-only or full file system: the error names the file
        raise with_filename(exc, path) from exc
    finally:
        os.close(dir_fd)
