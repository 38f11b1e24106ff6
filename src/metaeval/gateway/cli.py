"""`metaeval serve MODEL`, and the agent-CLI rows of `metaeval doctor`."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

out = Console(soft_wrap=True)

DOCTOR_REPLY = "metaeval-doctor-ok"
TOKEN_ENV = "METAEVAL_GATEWAY_TOKEN"


def serve(
    model: Annotated[str, typer.Argument(help="provider/model, e.g. local/smollm2.")],
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free).")] = 0,
    host: Annotated[str, typer.Option(help="Loopback address to listen on.")] = "127.0.0.1",
    record: Annotated[
        Path | None, typer.Option(help="Append every exchange (redacted) to this JSONL file.")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds a request may take to arrive, and an idle connection may stay open.",
        ),
    ] = 30.0,
) -> None:
    """Serve a metaeval model over the Anthropic, OpenAI (Responses, Chat) and Gemini APIs on
    loopback, so Claude Code, Codex, Gemini CLI or mini-swe-agent can run on it. Clients must
    send the printed token as their API key (or set one in $METAEVAL_GATEWAY_TOKEN)."""
    from metaeval.errors import ConfigError
    from metaeval.gateway.server import LOOPBACK_HOSTS, Gateway, serve_forever
    from metaeval.models.registry import get_model

    if host not in LOOPBACK_HOSTS:
        raise ConfigError(f"the gateway serves loopback only, not {host!r}", field="host")
    token = os.environ.get(TOKEN_ENV) or None
    try:
        gateway = Gateway(
            get_model(model),
            host=host,
            port=port,
            record_path=record,
            token=token,
            timeout_s=timeout,
        )
    except ValueError as exc:
        raise ConfigError(f"${TOKEN_ENV}: {exc}", field="token") from exc
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}", field="port") from exc

    def ready(gw: Gateway) -> None:
        url, key = gw.url, gw.token
        out.print(f"serving {model} at {url} (Ctrl-C stops)")
        out.print(f"  token:           {key} (send it as the API key; others get 401)")
        out.print(f"  Claude Code:     ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={key}")
        out.print(f"  OpenAI clients:  OPENAI_BASE_URL={url}/v1 OPENAI_API_KEY={key}")
        out.print(
            f"  Codex:           OPENAI_API_KEY={key} codex -c model_providers.m.base_url={url}/v1 "
            "-c model_providers.m.wire_api=responses -c model_providers.m.env_key=OPENAI_API_KEY "
            "-c model_provider=m"
        )
        out.print(f"  Gemini CLI:      GOOGLE_GEMINI_BASE_URL={url} GEMINI_API_KEY={key}")
        if record is not None:
            out.print(f"  exchanges:       {record}")

    try:
        serve_forever(gateway, on_ready=ready)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}", field="port") from exc


def cli_version(binary: Path) -> str:
    """What `binary --version` prints (first line), or why it could not be run."""
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run: {exc}"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return lines[0] if lines else f"exit code {done.returncode}"


def live_check(name: str) -> tuple[bool, str]:
    """Run CLI agent `name` once, sandboxed, on a gateway whose scripted model answers at once."""
    from metaeval.agents.cli import CLI_ADAPTERS
    from metaeval.agents.types import Limits, Task
    from metaeval.gateway.server import Gateway
    from metaeval.models.scripted import ScriptedModel
    from metaeval.sandbox.workspace import Workspace

    reply = DOCTOR_REPLY
    if name == "mini-swe-agent":  # text mode: its reply must be a command, here the submit one
        reply = "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
    model = ScriptedModel(lambda request: reply, name="scripted/doctor")
    with (
        tempfile.TemporaryDirectory(prefix="metaeval-doctor-") as tmp,
        Gateway(model, port=None) as gw,  # the CLI gets a socket (and token) of its own
    ):
        task = Task(id="doctor", instruction="Reply with one word.")
        result = CLI_ADAPTERS[name](gateway=gw).run(
            task, Workspace(Path(tmp)), Limits(time_limit_s=120)
        )
        calls = sum(1 for r in gw.exchanges.snapshot() if r.get("kind") == "completion")
    ok = result.status == "ok" and calls >= 1
    if name != "mini-swe-agent":
        ok = ok and (result.submission or "").strip() == DOCTOR_REPLY
    detail = f"live check via gateway: {result.status}, {calls} model call(s), {result.wall_clock_s:.1f}s"
    if not ok and result.error:
        detail += f" ({result.error[:200]})"
    return ok, detail


def agent_cli_checks(live: bool = True) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) per agent CLI: where it is, its version, a live run."""
    from metaeval.agents.cli import CLI_ADAPTERS
    from metaeval.agents.cli.base import resolve_binary

    checks = []
    for name, adapter in CLI_ADAPTERS.items():
        label = f"{name} (optional)"
        binary = resolve_binary(adapter.default_binary)
        if binary is None:
            checks.append((label, False, f"not installed; install with {adapter.install_hint}"))
            continue
        if name == "mini-swe-agent":
            from importlib.metadata import version

            detail = f"mini-swe-agent {version('mini-swe-agent')} at {binary}"
        else:
            detail = f"{cli_version(binary)} at {binary}"
        if not live:
            checks.append((label, True, detail))
            continue
        ok, live_detail = live_check(name)
        checks.append((label, ok, f"{detail}; {live_detail}"))
    return checks
