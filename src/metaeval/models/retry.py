"""The one retry loop every network provider uses: classify, back off, give up after N attempts.

Classification is by duck typing (HTTP status codes and exception class names), so this module
never imports a provider SDK. Provider SDKs are created with their own retries turned off.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from metaeval.errors import MetaevalError

T = TypeVar("T")
ErrorKind = Literal["rate_limit", "transient", "fatal"]

# Class names (anywhere in the MRO) that mean "try again later", across openai, anthropic,
# litellm and httpx/httpx2. Status codes take precedence when an exception carries one.
_RATE_LIMIT_NAMES = frozenset({"RateLimitError"})
_TRANSIENT_NAMES = frozenset(
    {
        "APITimeoutError",
        "APIConnectionError",
        "InternalServerError",
        "OverloadedError",
        "ServiceUnavailableError",
        "GatewayTimeoutError",
        "DeadlineExceededError",
        "Timeout",
        "TimeoutException",
        "TransportError",
        "NetworkError",
        "ConnectError",
        "ReadError",
        "RemoteProtocolError",
    }
)
_TRANSIENT_STATUS = frozenset({408, 409, 425, 529})


class ModelCallError(MetaevalError):
    """A model call that failed for good: `kind` of the last error, `attempts` made, `cause`,
    and the `endpoint` (base URL) it went to when known."""

    def __init__(self, kind: ErrorKind, attempts: int, cause: BaseException, endpoint: str = ""):
        self.kind = kind
        self.attempts = attempts
        self.cause = cause
        self.endpoint = endpoint
        plural = "s" if attempts != 1 else ""
        where = f" to {shown_endpoint(endpoint)}" if endpoint else ""
        super().__init__(
            f"model call{where} failed after {attempts} attempt{plural} ({kind}): "
            f"{type(cause).__name__}: {cause}"
        )


def shown_endpoint(url: str) -> str:
    """`url` without what may hold a credential (user info, query, fragment)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host  # an IPv6 address
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unparsable endpoint URL)"
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry. `max_attempts` counts the first call too."""

    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("delays must be non-negative")

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Delay after failed attempt `attempt` (1-based): capped exponential, full jitter."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        if not self.jitter:
            return ceiling
        return (rng or random).uniform(0.0, ceiling)


NO_RETRY = RetryPolicy(max_attempts=1)


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an SDK or HTTP exception carries, if any."""
    code = getattr(exc, "status_code", None)
    if code is None:
        response = getattr(exc, "response", None)
        code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _class_names(exc: BaseException) -> Iterable[str]:
    return (cls.__name__ for cls in type(exc).__mro__)


def classify(exc: BaseException) -> ErrorKind:
    """Sort an exception into "rate_limit", "transient" or "fatal" (unknown ones are fatal)."""
    if isinstance(exc, MetaevalError):
        return "fatal"
    status = status_code(exc)
    if status is not None:
        if status == 429:
            return "rate_limit"
        if status >= 500 or status in _TRANSIENT_STATUS:
            return "transient"
        if 400 <= status < 500:
            return "fatal"
    names = set(_class_names(exc))
    if names & _RATE_LIMIT_NAMES:
        return "rate_limit"
    if names & _TRANSIENT_NAMES or isinstance(exc, TimeoutError | ConnectionError):
        return "transient"
    return "fatal"


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    return headers


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), or None."""
    headers = _headers(exc)
    if not headers or not hasattr(headers, "get"):
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    sleep: Callable[[float], Any] = time.sleep,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Call `fn` until it succeeds; return (result, attempts) or raise ModelCallError.

    Rate-limit and transient errors are retried with capped exponential backoff (full jitter
    unless disabled); a Retry-After header replaces the computed delay, still capped by
    `max_delay_s`. Fatal errors stop at once. MetaevalError subclasses are re-raised as they
    are, without retry.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn(), attempt
        except MetaevalError:
            raise  # our own typed errors (config, replay, script) pass through unwrapped
        except Exception as exc:  # every other failure is classified
            kind = classify(exc)
            if kind == "fatal" or attempt >= policy.max_attempts:
                raise ModelCallError(kind, attempt, exc) from exc
            delay = policy.backoff(attempt, rng)
            asked = retry_after_s(exc)
            if asked is not None:
                delay = min(policy.max_delay_s, asked)
            sleep(delay)
