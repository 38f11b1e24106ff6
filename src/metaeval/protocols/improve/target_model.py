"""How a target agent reaches its model during an improve run.

The model is benchmark-owned: every version of the target uses the same one, and a patch can
never change it. It reaches the target's PACT server as environment variables:

- `METAEVAL_TARGET_MODEL`: the metaeval model name from the manifest (`none`: no model);
- `METAEVAL_TARGET_BASE_URL`, `METAEVAL_TARGET_API_KEY`: an OpenAI-compatible endpoint, set
  for targets whose profile says `model_api: openai` (the key is the gateway's token for this
  run's socket, or a placeholder: see below);
- `METAEVAL_TARGET_MAX_TOKENS`, `METAEVAL_TARGET_TEMPERATURE`: optional sampling settings.

The target never receives a credential, and its sandbox has no network (`loop.target_sandbox`):
only its own loopback, where port `MODEL_PORT` leads to a Unix socket of the harness's
(`SandboxSpec.services`). Behind that socket:

- a hosted model (any provider but `local`, `replay`, `scripted`), or an endpoint the manifest
  names with `base_url` and `api_key_env`: the metaeval gateway (`metaeval.gateway`), run by
  the harness with the user's key, serving OpenAI Chat Completions (and the Anthropic API). A
  `model_api: metaeval` target keeps its model name and finds the gateway through
  `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, with the socket's token as `OPENAI_API_KEY` /
  `ANTHROPIC_API_KEY` (another provider's model is asked for as `openai/NAME`). The token
  opens only this run's socket, which exists while the run does. The gateway's exchanges are recorded, redacted, in `gateway.jsonl`; its
  error messages reach the target redacted too;
- a `local/` model for an `openai` target: llama-cpp-python's server, started by the harness
  on 127.0.0.1 once per run, joined to the socket by a bridge;
- a `model_api: metaeval` target on a `local/`, `replay/` or `scripted/` model loads it
  itself and needs nothing.

A model server that cannot start is an evaluation-framework failure (it belongs to the
harness), never a failure of the candidate.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError, MetaevalError
from metaeval.gateway.relay import serve_connections, to_port
from metaeval.models.base import Model
from metaeval.models.types import ModelRequest, ModelResult
from metaeval.protocols.improve.config import TargetModelSettings
from metaeval.protocols.improve.pact.launcher import RunningSystem, launch
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.records import TargetUsage
from metaeval.records.redact import redact_text

LOCAL_PREFIX = "local/"
LOCAL_API_KEY = "sk-local-no-key"  # llama.cpp's server ignores it; OpenAI clients want one
SERVER_STARTUP_S = 180.0


def local_server_profile(settings: TargetModelSettings) -> SystemProfile:
    """A SystemProfile that serves a `local/` model with `python -m llama_cpp.server`."""
    from metaeval.models.local import default_threads, resolve_gguf

    missing = [
        m for m in ("llama_cpp", "uvicorn", "fastapi") if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise ConfigError(
            f"serving {settings.model} needs llama-cpp-python's server "
            f"(missing: {', '.join(missing)}); install it with pip install 'metaeval[local,server]'",
            field="sum.model",
        )
    gguf = resolve_gguf(settings.model[len(LOCAL_PREFIX) :])
    threads = str(default_threads())
    return SystemProfile(
        name="target-model-server",
        command=[
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            served_alias(settings.model),
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--n_ctx",
            str(settings.n_ctx),
            "--n_threads",
            threads,
            "--n_threads_batch",
            threads,
        ],  # fmt: skip
        health_path="/v1/models",
        describe_path="/v1/models",
        startup_timeout_s=SERVER_STARTUP_S,
    )


def served_alias(model: str) -> str:
    """The name an OpenAI-compatible server knows a model by: the part after the provider.

    `local/smollm2` -> `smollm2`, `local/m/q4.gguf` -> `q4` (the alias the harness serves it
    under), `openai/Qwen/Qwen2.5-Coder` -> `Qwen/Qwen2.5-Coder` (a vLLM model id).
    """
    tail = model.split("/", 1)[-1]
    return Path(tail).stem if tail.endswith(".gguf") else tail


IN_PROCESS_PROVIDERS = ("local", "replay", "scripted")
"""Providers a `model_api: metaeval` target runs itself: no key, no network."""
MODEL_PORT = 8787
"""The loopback port, inside a target's sandbox, that leads to the harness's model socket."""
MODEL_URL = f"http://127.0.0.1:{MODEL_PORT}"


class _RedactedErrors(Model):
    """`model` with its failures' messages redacted: the gateway sends them to the target."""

    def __init__(self, model: Model):
        super().__init__(model.name)
        self.provider = model.provider
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def supports_native_tools(self) -> bool:
        return self._model.supports_native_tools()

    def complete(self, request: ModelRequest) -> ModelResult:
        try:
            return self._model.complete(request)
        except Exception as exc:
            raise MetaevalError(redact_text(f"{type(exc).__name__}: {exc}")) from None


class TargetModelService:
    """The target's model for one run: environment variables, and what serves the model.

    `env()` starts what the target needs on first use (thread-safe): the harness's gateway or
    local model server, and the Unix socket `services()` names for the target's sandbox;
    `stop()` ends them. Both are cheap when the target loads its model itself.
    """

    def __init__(self, settings: TargetModelSettings, model_api: str, log_dir: Path):
        self.settings = settings
        self.model_api = model_api
        self.log_dir = log_dir
        self._server: RunningSystem | None = None
        self._gateway: Any = None
        self._bridge: socket.socket | None = None
        self._socket: Path | None = None
        self._token: str | None = None  # the gateway socket's own token, not a provider key
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.settings.model or "none"

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0]

    def _endpoint_target(self) -> bool:
        """True when the target calls an OpenAI-compatible endpoint for its model."""
        return self.model_api == "openai" and self.model != "none"

    def needs_server(self) -> bool:
        """True when the harness must serve the model itself (openai API, local model)."""
        return (
            self._endpoint_target()
            and self.settings.base_url is None
            and self.model.startswith(LOCAL_PREFIX)
        )

    def needs_gateway(self) -> bool:
        """True when the model needs a credential or the network: the harness's gateway."""
        if self._endpoint_target():
            return not self.needs_server()
        return self.model != "none" and self.provider not in IN_PROCESS_PROVIDERS

    def _api_key(self) -> str:
        """The endpoint's key: from the variable `api_key_env` names, else a placeholder."""
        name = self.settings.api_key_env
        if not name:
            return LOCAL_API_KEY
        key = os.environ.get(name)
        if not key:
            raise ConfigError(f"environment variable {name} is not set", field="sum.api_key_env")
        return key

    def env(self) -> dict[str, str]:
        """The variables a target launch gets (starting the model's server on first use).

        Raises LaunchError when the local model server does not come up, ConfigError when a
        named API key variable is unset or the hosted model cannot be made.
        """
        s = self.settings
        env = {"METAEVAL_TARGET_MODEL": self.model}
        if s.max_tokens is not None:
            env["METAEVAL_TARGET_MAX_TOKENS"] = str(s.max_tokens)
        if s.temperature is not None:
            env["METAEVAL_TARGET_TEMPERATURE"] = repr(s.temperature)
        if self.needs_server():
            self._start()
        elif self.needs_gateway():
            self._start_gateway()
        token = self._token or LOCAL_API_KEY
        if self._endpoint_target():
            env["METAEVAL_TARGET_BASE_URL"] = f"{MODEL_URL}/v1"
            env["METAEVAL_TARGET_API_KEY"] = token
        elif self.needs_gateway():
            if self.provider == "anthropic":
                env.update(ANTHROPIC_BASE_URL=MODEL_URL, ANTHROPIC_API_KEY=token)
            else:
                if self.provider != "openai":  # asked for by name over Chat Completions
                    env["METAEVAL_TARGET_MODEL"] = f"openai/{self.model}"
                env.update(OPENAI_BASE_URL=f"{MODEL_URL}/v1", OPENAI_API_KEY=token)
        return env

    def services(self) -> tuple[tuple[int, str], ...]:
        """What a target's sandbox is joined to: (MODEL_PORT, the model socket), once started."""
        with self._lock:
            return ((MODEL_PORT, str(self._socket)),) if self._socket is not None else ()

    def base_url(self) -> str | None:
        """The endpoint the harness itself checks: the manifest's `base_url`, or the local
        server once started (None: none, or a hosted provider's own API)."""
        if not self._endpoint_target():
            return None
        if self.settings.base_url is not None:
            return self.settings.base_url
        with self._lock:
            return f"{self._server.base_url}/v1" if self._server is not None else None

    def endpoint_down(self, timeout_s: float = 5.0) -> bool:
        """True when the model endpoint the target was given no longer answers GET /models.

        Checked by the harness itself after an evaluation: an evaluation during which the
        benchmark-owned model went away is an infrastructure failure, and only the harness (not
        code the candidate controls) may say so.
        """
        url = self.base_url()
        if url is None:
            return False
        with self._lock:
            if self._server is not None and self._server.process.poll() is not None:
                return True
        request = urllib.request.Request(url.rstrip("/") + "/models")
        request.add_header("Authorization", f"Bearer {self._api_key()}")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status >= 500
        except urllib.error.HTTPError as exc:
            return exc.code >= 500
        except OSError:
            return True

    def free(self) -> bool:
        """True when the target's model costs nothing: none, or one run on this machine."""
        return self.model == "none" or (
            self.settings.base_url is None and self.provider in IN_PROCESS_PROVIDERS
        )

    def usage_mark(self) -> int:
        """A position in the gateway's exchanges; `usage_since` counts what came after."""
        with self._lock:
            gateway = self._gateway
        return 0 if gateway is None else len(gateway.exchanges.records)

    def usage_since(self, mark: int) -> TargetUsage | None:
        """Tokens and cost of the target's model calls the gateway served after `mark`, as
        the gateway counted them (the provider's usage, else its own count), never as the
        target reports them; None when no gateway serves the target's model."""
        with self._lock:
            gateway = self._gateway
        if gateway is None:
            return None
        records = gateway.exchanges.snapshot()[mark:]
        done = [r for r in records if r.get("kind") == "completion" and r.get("status") == 200]
        costs = [r.get("cost_usd") for r in done]
        return TargetUsage(
            source="gateway",
            calls=len(done),
            input_tokens=sum(int(r["usage"].get("input_tokens") or 0) for r in done),
            output_tokens=sum(int(r["usage"].get("output_tokens") or 0) for r in done),
            cost_usd=None if None in costs else round(sum(float(c) for c in costs), 6),
        )

    def _socket_path(self) -> Path:
        """A fresh private directory's socket path (the lock is held)."""
        return Path(tempfile.mkdtemp(prefix="mt-")) / "model.sock"

    def _start(self) -> RunningSystem:
        with self._lock:
            if self._server is None or self._server.process.poll() is not None:
                profile = local_server_profile(self.settings)
                self._server = launch(profile, log_path=self.log_dir / "target-model-server.log")
                self._close_socket()
                self._socket = self._socket_path()
                self._bridge = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._bridge.bind(str(self._socket))
                self._bridge.listen(64)
                threading.Thread(
                    target=serve_connections,
                    args=(self._bridge, to_port(self._server.port)),
                    daemon=True,
                    name="target-model-bridge",
                ).start()
            return self._server

    def _start_gateway(self) -> None:
        from metaeval.gateway import Gateway
        from metaeval.models.registry import get_model

        with self._lock:
            if self._gateway is not None:
                return
            s = self.settings
            endpoint = self._endpoint_target() and s.base_url is not None
            api_key = self._api_key() if endpoint else None
            try:
                if endpoint:
                    model = get_model(
                        f"openai/{served_alias(self.model)}", base_url=s.base_url, api_key=api_key
                    )
                else:
                    model = get_model(self.model)
            except MetaevalError as exc:
                raise ConfigError(f"target model {self.model}: {exc}", field="sum.model") from exc
            # Only the Unix socket is opened, with a token of its own (the target's "API key":
            # it spends the user's key, but only through this run's socket); no TCP listener.
            gateway = Gateway(
                _RedactedErrors(model), port=None, record_path=self.log_dir / "gateway.jsonl"
            )
            self._socket = self._socket_path()
            _, self._token = gateway.open_socket("target", self._socket)
            self._gateway = gateway

    def _close_socket(self) -> None:
        if self._bridge is not None:
            with contextlib.suppress(OSError):
                self._bridge.shutdown(socket.SHUT_RDWR)
            self._bridge.close()
            self._bridge = None
        if self._socket is not None:
            shutil.rmtree(self._socket.parent, ignore_errors=True)
            self._socket = None

    def stop(self) -> None:
        """Stop the gateway or local model server, if one was started."""
        with self._lock:
            if self._server is not None:
                self._server.stop()
                self._server = None
            if self._gateway is not None:
                self._gateway.stop()
                self._gateway = None
                self._token = None
            self._close_socket()
