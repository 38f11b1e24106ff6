"""Reads and writes of files that never follow a link or open a special file.

A run directory may come from someone else (a shared or downloaded run). Any entry in it can
then be a symbolic link to a file of the user's (``.lock`` -> ``~/.bashrc``), so every file
metaeval writes, appends to or locks there is opened with ``O_NOFOLLOW``, and every directory
below the run directory is walked one component at a time, also without following links. A
link, a FIFO or a device where a file or directory is expected is refused with a `ConfigError`
naming it; nothing is written. The run directory itself (the path the user gave) is trusted.

Reading is the same rule (`open_for_reading`, and `read_capped` for a whole file with a size
cap): the file of a run directory (a review sheet, a score) and the file a user names on the
command line (a gold file, a patch, a config file) that may come from a benchmark are read only
when they are regular files; a FIFO (which would block), a device (``/dev/zero`` never ends)
or a file larger than the cap is refused with an error naming it. A link in a run directory is
refused; the last link of a path the user typed is followed (`follow_link`), to a regular file
only.
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


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a regular file"),
)


def refused(path: Path, what: str = "a regular file", mode: int | None = None) -> ConfigError:
    """The error for a file that is a link (or not what it should be), met while reading or
    writing: the one rule for both. `mode` is what an open found (a followed link's target)."""
    try:
        found = os.lstat(path).st_mode if mode is None else mode
        kind = next(name for test, name in _KINDS if test(found))
        text = f"{kind}, not {what}"
    except (OSError, StopIteration):
        text = f"not {what}"
    return ConfigError(
        f"is {text}; metaeval never reads or writes through links or special files of a run "
        "directory or a benchmark (a shared run may point them anywhere, a FIFO blocks, a "
        "device never ends): remove it, or use a copy without links",
        file=str(path),
    )


class NotRegularFile(OSError):
    """`open_regular_fd` opened something else than a regular file (`mode`: its fstat)."""

    def __init__(self, path: str | os.PathLike[str], mode: int):
        super().__init__(errno.EINVAL, "not a regular file", os.fspath(path))
        self.mode = mode


def open_regular_fd(path: str | os.PathLike[str], *, follow_link: bool = False) -> int:
    """The one open of a file metaeval reads and does not trust (this module's readers and
    `tasks.safe_files`'): read-only, non-blocking while opening (a FIFO cannot hang it), not
    through a link unless `follow_link` (ELOOP), and kept only when fstat says it is a regular
    file (`NotRegularFile` otherwise: a FIFO, a device such as /dev/zero, a directory). The
    descriptor returned blocks again."""
    flags = os.O_RDONLY | FILE_FLAGS
    if follow_link:
        flags &= ~os.O_NOFOLLOW
    fd = os.open(path, flags)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(path, mode)
    os.set_blocking(fd, True)
    return fd


def open_for_reading(path: Path, *, follow_link: bool = False) -> int | None:
    """A blocking read-only descriptor of the regular file `path` (`open_regular_fd`), never
    through a link (but the last one of a path the user gave, with `follow_link`); None when it
    does not exist, `refused` when a link, FIFO or device stands in its place."""
    try:
        return open_regular_fd(path, follow_link=follow_link)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise refused(path, mode=exc.mode) from None
    except OSError as exc:  # ELOOP: a symlink; ENXIO: a FIFO without a writer
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise refused(path) from exc
        raise with_filename(exc, path) from exc


def read_capped(path: Path, max_bytes: int, *, follow_link: bool = False) -> bytes | None:
    """The bytes of the regular file `path` by `open_for_reading`'s rule, None when it does not
    exist; a ConfigError naming it when it holds more than `max_bytes` (read no further)."""
    fd = open_for_reading(Path(path), follow_link=follow_link)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ConfigError(f"is larger than {max_bytes} bytes; not read", file=str(path))
    return data


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
