"""Codex adapter: ``codex exec --json [--model M] --sandbox MODE --skip-git-repo-check <prompt>``.

Its JSON-lines output is read by `metaeval.agents.cli.codex_stream` (the event formats, the
usage total and how shell commands are classified are described there).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from metaeval.agents.cli.base import CLIAdapter
from metaeval.agents.cli.codex_stream import parse_codex_stream
from metaeval.agents.cli.stream import ParsedStream
from metaeval.agents.types import Limits, Task

if TYPE_CHECKING:
    from metaeval.sandbox.workspace import Workspace


class CodexAdapter(CLIAdapter):
    """OpenAI Codex CLI, non-interactive ``exec`` with JSONL events.

    Sandbox: inside metaeval's own sandbox codex's is bypassed
    (``--dangerously-bypass-approvals-and-sandbox``: its landlock/seccomp helper cannot nest
    in bubblewrap, and the workspace is already bound read-only for read-only tasks); without
    it, ``workspace-write`` when the task allows writing, else ``read-only``.
    ``--skip-git-repo-check`` is always passed since workspaces need not be git repositories.
    ``CODEX_HOME`` is the run's private home (outside /tmp, where codex refuses to create its
    helper binaries). On a gateway the provider is configured with ``-c`` flags
    (``wire_api = "responses"``, the only one codex 0.169 accepts); ``OPENAI_BASE_URL`` is
    not read by it.
    """

    name: ClassVar[str] = "codex"
    default_binary: ClassVar[str] = "codex"
    product: ClassVar[str] = "the Codex CLI"
    credential_env: ClassVar[tuple[str, ...]] = (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CODEX_API_KEY",
    )
    quiet_env: ClassVar[dict[str, str]] = {"NO_COLOR": "1", "RUST_LOG": "error"}
    quiet_args: ClassVar[tuple[str, ...]] = (
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        "analytics.enabled=false",
        "-c",
        "feedback.enabled=false",
    )

    # `model_reasoning_effort` of codex 0.169's config (sent as the Responses API's reasoning
    # effort); "none" and "minimal" exist too but not every model takes them.
    efforts: ClassVar[tuple[str, ...]] = ("none", "minimal", "low", "medium", "high", "xhigh")

    def sandbox_env(self, home: Path) -> dict[str, str]:
        env = super().sandbox_env(home)
        env["CODEX_HOME"] = str(home / ".codex")
        return env

    def effort_args(self) -> list[str]:
        return ["-c", f"model_reasoning_effort={self.effort}"] if self.effort else []

    def endpoint_env(self, base_url: str | None, api_key: str | None) -> dict[str, str]:
        return {"OPENAI_API_KEY": api_key} if api_key else {}

    def endpoint_args(self, base_url: str) -> list[str]:
        return ["-c", f"openai_base_url={base_url}"]  # codex does not read OPENAI_BASE_URL

    def prepare_home(self, home: Path, task: Task, on_gateway: bool) -> None:
        (home / ".codex").mkdir(parents=True, exist_ok=True)

    def gateway_env(self, base_url: str, home: Path, api_key: str) -> dict[str, str]:
        return {"OPENAI_API_KEY": api_key}  # sent as Authorization: Bearer (env_key below)

    def gateway_args(self, base_url: str) -> list[str]:
        provider = "model_providers.metaeval"
        pairs = [
            "model_provider=metaeval",
            f"model={self.gateway_model}",
            f"{provider}.name=metaeval",
            f"{provider}.base_url={base_url}/v1",
            f"{provider}.wire_api=responses",
            f"{provider}.env_key=OPENAI_API_KEY",
            f"{provider}.request_max_retries=0",
            f"{provider}.stream_max_retries=0",
        ]
        return [arg for pair in pairs for arg in ("-c", pair)]

    def build_argv(self, task: Task, workspace: Workspace, limits: Limits) -> list[str]:
        from metaeval.sandbox.bwrap import use_bwrap

        argv = [self.binary, *self.quiet_args, "exec", "--json"]
        if self.model:
            argv += ["--model", self.model]
        if use_bwrap():
            argv += ["--dangerously-bypass-approvals-and-sandbox"]
        else:
            argv += ["--sandbox", "workspace-write" if task.allow_write else "read-only"]
        argv += ["--skip-git-repo-check", *self.extra_args]
        return [*argv, task.instruction]

    def parse_output(self, stdout: str, task: Task, workspace: Workspace) -> ParsedStream:
        return parse_codex_stream(stdout.splitlines())
