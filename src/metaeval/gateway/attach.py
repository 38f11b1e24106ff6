"""Connecting a sandboxed agent CLI to a gateway.

A CLI agent given a metaeval model (``claude-code:local/smollm2``, ``codex:replay/FILE``)
talks to a gateway this process starts for that model, shared by every run that names it and
stopped at exit. That gateway opens no TCP port of its own: each run gets its own Unix socket
on it (a TCP port when unsandboxed) with a token of its own, which the CLI is given as its API
key, so the exchanges of concurrent runs are told apart exactly and no other process can use
the listener.

Network policy: the sandboxed CLI has no network at all, only the loopback interface of its own
network namespace. `relay.py` listens there on 127.0.0.1:`SANDBOX_PORT` and forwards to the
run's Unix socket, bound into the sandbox. So the CLI reaches the gateway and nothing else:
not the internet, not the host's own loopback services.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from metaeval.gateway.server import Gateway

SANDBOX_PORT = 8787
RELAY_SCRIPT = Path(__file__).with_name("relay.py")
METAEVAL_PROVIDERS = ("local", "openai", "anthropic", "litellm", "replay", "scripted")

_shared: dict[str, Gateway] = {}
_shared_lock = threading.Lock()


def is_metaeval_model(model: str | None) -> bool:
    """True for a ``provider/model`` name of a metaeval provider (served through a gateway);
    a CLI's own model names (``claude-sonnet-4-5``, ``gpt-5``) have no provider prefix."""
    if not model or "/" not in model:
        return False
    from metaeval.models.registry import _providers

    provider = model.split("/", 1)[0]
    return provider in _providers or provider in METAEVAL_PROVIDERS


def shared_gateway(model_name: str) -> Gateway:
    """The process-wide gateway serving `model_name`, started on first use."""
    with _shared_lock:
        gateway = _shared.get(model_name)
        if gateway is None:
            from metaeval.models.registry import get_model

            record_dir = os.environ.get("METAEVAL_GATEWAY_LOG_DIR")
            record = None
            if record_dir:
                safe = model_name.replace("/", "_")
                record = Path(record_dir) / f"gateway-{safe}-{os.getpid()}.jsonl"
            gateway = Gateway(get_model(model_name), port=None, record_path=record).start()
            _shared[model_name] = gateway
            if len(_shared) == 1:
                atexit.register(stop_shared_gateways)
        return gateway


def stop_shared_gateways() -> None:
    with _shared_lock:
        for gateway in _shared.values():
            with contextlib.suppress(Exception):
                gateway.stop()
        _shared.clear()


@dataclass
class Link:
    """One run's connection: the Unix socket on the gateway, the URL the CLI uses, and the
    token it must send as its API key."""

    gateway: Gateway
    tag: str
    socket_dir: Path | None  # None when unsandboxed: the CLI uses `address` over TCP
    sandboxed: bool
    address: str
    token: str

    @property
    def socket_path(self) -> Path:
        assert self.socket_dir is not None
        return self.socket_dir / "gw.sock"

    @property
    def base_url(self) -> str:
        if self.sandboxed:
            return f"http://127.0.0.1:{SANDBOX_PORT}"
        return self.address

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` behind the loopback relay (sandboxed) or unchanged."""
        if not self.sandboxed:
            return argv
        python = os.path.realpath(sys.executable)
        return [
            python,
            "-I",
            str(RELAY_SCRIPT),
            str(SANDBOX_PORT),
            str(self.socket_path),
            "--",
            *argv,
        ]

    def close(self) -> None:
        self.gateway.close_socket(self.tag)
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def open_link(gateway: Gateway, tag: str, sandboxed: bool) -> Link:
    """A fresh per-run socket on `gateway` (a fresh TCP port when not sandboxed), with a
    fresh token."""
    socket_dir = Path(tempfile.mkdtemp(prefix="mg-")) if sandboxed else None
    address, token = gateway.open_socket(tag, socket_dir / "gw.sock" if socket_dir else None)
    return Link(gateway, tag, socket_dir, sandboxed, address, token)
