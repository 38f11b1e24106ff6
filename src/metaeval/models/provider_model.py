"""What every provider's model shares: adaptive concurrency limits, retries, cost, credentials.

A provider subclasses `ProviderModel` and implements `_complete_once`; `complete` adds the
limiter slot, the retry loop, latency and cost. The registry (`metaeval.models.registry`)
maps `provider/model` names to these classes.
"""

from __future__ import annotations

import os
import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from metaeval.errors import ConfigError, ProviderUnavailableError
from metaeval.models.base import Model
from metaeval.models.limits import AdaptiveLimiter, CallOutcome
from metaeval.models.pricing import PriceTable, price_table
from metaeval.models.retry import ModelCallError, RetryPolicy, call_with_retry, classify
from metaeval.models.types import ModelRequest, ModelResult

# Slots a provider has by default. Only the in-process local model has a fixed number (its
# weights serve one call at a time); every other provider follows the executor's concurrency
# unless the user sets max_connections.
DEFAULT_MAX_CONNECTIONS: dict[str, int] = {"local": 1}

# ---------------------------------------------------------------------------------------------
# Concurrency limits


_limiters: dict[tuple[str, str, int | None], AdaptiveLimiter] = {}
_limiters_lock = threading.Lock()


def _check_limit(limit: object, field: str) -> int | None:
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigError(f"must be a positive integer, got {limit!r}", field=field)
    return limit


def concurrency_limiter(
    provider: str, limit: int | None = None, endpoint: str = ""
) -> AdaptiveLimiter:
    """The process-wide adaptive limiter of `provider` at `endpoint` with ceiling `limit`.

    All models of one provider, endpoint and ceiling share one limiter, so a rate limit seen by
    one slows them all. `limit` defaults to DEFAULT_MAX_CONNECTIONS (local 1, others none).
    """
    if limit is None:
        limit = DEFAULT_MAX_CONNECTIONS.get(provider)
    limit = _check_limit(limit, "max_connections")
    with _limiters_lock:
        key = (provider, endpoint, limit)
        limiter = _limiters.get(key)
        if limiter is None:
            limiter = _limiters[key] = AdaptiveLimiter(limit)
        return limiter


def _as_policy(retry: RetryPolicy | dict[str, Any] | None, default: RetryPolicy) -> RetryPolicy:
    if retry is None:
        return default
    if isinstance(retry, RetryPolicy):
        return retry
    if isinstance(retry, dict):
        try:
            return RetryPolicy(**retry)
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc), field="retry") from exc
    raise ConfigError(
        f"expected a RetryPolicy or mapping, got {type(retry).__name__}", field="retry"
    )


def resolve_credentials(
    name: str,
    api_key: str | None,
    base_url: str | None,
    *,
    key_env: str,
    url_env: str,
    host: str,
    placeholder: str,
) -> tuple[str, str | None]:
    """(api_key, base_url) from the options, else the environment.

    The provider's own host needs a key; any other base_url works without one, and gets a
    placeholder key because the SDKs refuse an empty one.
    """
    api_key = api_key or os.environ.get(key_env) or None
    base_url = base_url or os.environ.get(url_env) or None
    if api_key is None:
        if base_url is None:
            raise ProviderUnavailableError(
                f"{name}: {key_env} not set (needed for {host}; "
                "pass base_url=... for any compatible server, which needs no key)"
            )
        api_key = placeholder
    return api_key, base_url


PROVIDER_CREDENTIAL_ENV: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}
"""The variables each hosted provider reads its credentials and endpoint from."""


def credential_env(model: str) -> dict[str, str]:
    """The set credential variables the provider of `model` reads (empty for local ones).

    A sandboxed process that loads a model itself gets exactly these from the host, and no
    other variable of the host's environment.
    """
    provider = model.split("/", 1)[0]
    names = PROVIDER_CREDENTIAL_ENV.get(provider, ())
    return {name: os.environ[name] for name in names if os.environ.get(name)}


class ProviderModel(Model):
    """Base for providers: subclasses implement `_complete_once`; `complete` adds the rest.

    `complete` holds a slot of the provider's adaptive limiter around each attempt (rate limits
    shrink the slots, successes grow them back), retries through `call_with_retry`, and fills
    model, latency_s (wall time the caller waited, retries included), attempts, cost_usd and
    price_table_version.

    Common options: max_connections (a ceiling on concurrent calls; `max_concurrency` is an
    older name for it), timeout_s (seconds per call; network providers), retry, prices.
    """

    provider = ""
    default_retry = RetryPolicy()
    default_timeout_s: float | None = None

    def __init__(
        self,
        name: str,
        *,
        max_connections: int | None = None,
        max_concurrency: int | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy | dict[str, Any] | None = None,
        prices: PriceTable | None = None,
    ):
        super().__init__(name)
        self.retry_policy = _as_policy(retry, self.default_retry)
        limit = max_connections if max_connections is not None else max_concurrency
        self.max_connections = _check_limit(limit, "max_connections")
        if timeout_s is not None and (
            isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0
        ):
            raise ConfigError(f"must be a positive number, got {timeout_s!r}", field="timeout_s")
        self.timeout_s = float(timeout_s) if timeout_s is not None else self.default_timeout_s
        self._limiter: AdaptiveLimiter | None = None
        self._prices = prices
        self.sleep: Callable[[float], Any] = time.sleep  # replaceable in tests

    def endpoint(self) -> str:
        """Where calls go (a base URL), so limits are shared per endpoint; "" by default."""
        return ""

    @property
    def limiter(self) -> AdaptiveLimiter:
        """The adaptive limiter this model's calls share with others of the same endpoint."""
        if self._limiter is None:
            self._limiter = concurrency_limiter(
                self.provider, self.max_connections, self.endpoint()
            )
        return self._limiter

    @property
    def prices(self) -> PriceTable:
        """The price table costs are computed with (the bundled one unless given)."""
        return self._prices or price_table()

    @abstractmethod
    def _complete_once(self, request: ModelRequest) -> ModelResult:
        """One attempt, no retries: call the backend and parse its answer."""

    def complete(self, request: ModelRequest) -> ModelResult:
        """One completion with concurrency limit, retries, latency and cost filled in."""
        start = time.monotonic()
        limiter = self.limiter

        def attempt() -> ModelResult:
            ticket = limiter.acquire()
            outcome: CallOutcome = "error"
            try:
                result = self._complete_once(request)
                outcome = "ok"
                return result
            except Exception as exc:
                if classify(exc) == "rate_limit":
                    outcome = "rate_limit"
                raise
            finally:
                limiter.release(ticket, outcome)

        # a job's CPU-gate slot is given back around the call by the engine's call_slot()
        try:
            result, attempts = call_with_retry(attempt, self.retry_policy, sleep=self.sleep)
        except ModelCallError as exc:  # name the endpoint: the console groups by reason
            if not self.endpoint() or exc.endpoint:
                raise
            raise ModelCallError(exc.kind, exc.attempts, exc.cause, self.endpoint()) from exc.cause
        table = self.prices
        return result.model_copy(
            update={
                "model": self.name,
                "latency_s": time.monotonic() - start,
                "attempts": attempts,
                "cost_usd": table.cost(self.name, result.usage),
                "price_table_version": table.version,
            }
        )
