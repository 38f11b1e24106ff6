"""Typed errors shared by every layer. User-facing ones carry a file and field."""

from __future__ import annotations

import errno

from metaeval.exit_codes import BAD_INPUT, CELLS_FAILED


class MetaevalError(Exception):
    """Base class for errors metaeval reports to the user (exit code 2)."""

    exit_code = BAD_INPUT


class ConfigError(MetaevalError):
    """Bad user input: a malformed file, an unknown name, a missing file.

    The message always names the offending file and, where there is one, the field.
    """

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = field
        self.message = message  # without the file and field it is prefixed with
        where = ""
        if file and field:
            where = f"{file}: field '{field}': "
        elif file:
            where = f"{file}: "
        elif field:
            where = f"field '{field}': "
        super().__init__(f"{where}{message}")


class UnknownProviderError(ConfigError):
    """A model name whose provider is not registered."""


class ProviderUnavailableError(MetaevalError):
    """A provider whose SDK, weights or credentials are missing on this machine."""


class RetryableRunError(MetaevalError):
    """A run stopped by an infrastructure failure that rerunning the same command retries
    (exit code 3)."""

    exit_code = CELLS_FAILED


class RecordIntegrityError(MetaevalError):
    """A run directory whose manifest disagrees with the current configuration."""


TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.EBUSY,
        errno.EINTR,
        errno.EIO,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOMEM,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.EPIPE,
    }
)
"""OS error numbers of a machine or network that may recover by itself."""


def is_os_transient(exc: BaseException) -> bool:
    """True for failures of the machine or the network that may pass on a retry: the
    OS-level part of the one transient rule, `metaeval.transient.is_transient`, which adds
    model-call classification (use that one).

    Timeouts, lost connections, a full disk, too many open files, memory exhaustion. A parse,
    validation or recursion failure, or any other error caused by the input itself, is not:
    retrying it fails the same way.
    """
    if isinstance(exc, TimeoutError | ConnectionError | MemoryError | InterruptedError):
        return True
    if type(exc).__name__ == "BrokenProcessPool":  # a worker process was killed (OOM, signal)
        return True
    if isinstance(exc, OSError):
        return exc.errno in TRANSIENT_ERRNOS
    return False


OPERATOR_FAULTS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large (a file size limit or the file system's)",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}
"""OS error numbers of faults the operator fixes: a full disk, an output that cannot be written."""


def with_filename(exc: OSError, path: object) -> OSError:
    """`exc` naming `path` (a write's error names no file; a ``dir_fd`` open names only the
    last component); `exc` itself when it names a full path already."""
    if exc.filename is not None and str(exc.filename).startswith("/"):
        return exc
    named = OSError(exc.errno, exc.strerror or str(exc), str(path))  # the same OSError subclass
    named.__cause__ = exc
    return named


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _undecodable_name(exc: UnicodeError) -> str | None:
    """The word of a failed encoding that holds an undecodable byte of a file name (kept by
    "surrogateescape" as a lone surrogate), else None."""
    text = getattr(exc, "object", None)
    start = getattr(exc, "start", None)
    if not isinstance(text, str) or not isinstance(start, int) or start >= len(text):
        return None
    if not 0xDC80 <= ord(text[start]) <= 0xDCFF:
        return None
    separators = " \t\n\"'<>,;()[]{}="
    left = max((text.rfind(c, 0, start) for c in separators), default=-1) + 1
    right = min((i for c in separators if (i := text.find(c, start)) >= 0), default=len(text))
    return text[left:right][:300]


def operator_fault(exc: BaseException) -> str | None:
    """What an operator must fix, naming the file, when `exc` (or what caused it) is one: a
    full disk or quota, a read-only or unwritable output, a file name that is not UTF-8.
    None for anything else."""
    for error in _chain(exc):
        if isinstance(error, OSError) and error.errno in OPERATOR_FAULTS:
            where = f"{error.filename}: " if error.filename else ""
            return where + OPERATOR_FAULTS[error.errno]
        if isinstance(error, UnicodeError) and (name := _undecodable_name(error)) is not None:
            return f"{name}: a file name that is not UTF-8; rename it (metaeval records names as UTF-8)"
    return None
