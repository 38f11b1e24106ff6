"""Typed errors shared by every layer. User-facing ones carry a file and field."""

from __future__ import annotations

import errno


class MetaevalError(Exception):
    """Base class for errors metaeval reports to the user (exit code 2)."""

    exit_code = 2


class ConfigError(MetaevalError):
    """Bad user input: a malformed file, an unknown name, a missing file.

    The message always names the offending file and, where there is one, the field.
    """

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = field
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


def is_transient(exc: BaseException) -> bool:
    """True for failures of the machine or the network that may pass on a retry (the
    OS-level rule; `metaeval.transient.is_transient` adds model-call classification).

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
