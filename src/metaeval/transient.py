"""Which failures are infrastructure (transient: retry on resume) and which are final errors.

Only causes that may pass on their own are transient: timeouts, rate limits (429), server
errors (5xx), lost connections, a machine out of memory, disk space, processes or file
handles, a model call that gave up after retrying one of those, a provider that is not usable
on this machine yet, and a model call the provider refused for the run's setup (HTTP 401,
403, 404 or 407: a key, a permission, a model or path name; fixing the setup and rerunning
must retry every cell it failed, and none of it is the cell's own fault). A parse,
validation, type or recursion error, or a model call refused for what the cell sent (HTTP 400,
413, 422: e.g. a prompt too long for the model), fails the same way every time it is
retried, so it is recorded once as an error with its message.
"""

from __future__ import annotations

import subprocess

from metaeval.errors import ProviderUnavailableError, is_os_transient
from metaeval.models.retry import ModelCallError, classify, status_code

SETUP_STATUS = frozenset({401, 403, 404, 407})
"""HTTP statuses of a model call refused for the run's setup, not for the cell's request."""


def is_transient(exc: BaseException) -> bool:
    """True when `exc` may not happen again on a retry (see the module docstring)."""
    if isinstance(exc, ModelCallError):
        return exc.kind != "fatal" or status_code(exc.cause) in SETUP_STATUS
    if isinstance(exc, ProviderUnavailableError | subprocess.TimeoutExpired):
        return True
    if is_os_transient(exc):
        return True
    return classify(exc) != "fatal"


def describe(exc: BaseException) -> str:
    """`Type: message` of an exception, capped, for an error field of a record."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 2000 else text[:2000] + " ..."
