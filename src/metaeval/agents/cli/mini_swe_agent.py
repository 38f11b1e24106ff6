"""mini-swe-agent adapter: ``mini -t <task> --yolo --exit-immediately -o <traj.json> [-m M]``.

It prints a rich console UI, not events, so the adapter reads the trajectory file it saves
(``--output``), with `metaeval.agents.cli.mini_trajectory` (the trajectory format, actions,
observations and usage are described there).

mini-swe-agent asks interactive setup questions on first use unless ``MSWEA_CONFIGURED`` is
set, so the command runs through ``env MSWEA_CONFIGURED=true``; the model's API key must be in
the environment. The trajectory goes to a hidden file in the workspace (removed after reading,
never listed in files_produced), or, for a read-only workspace, to the host temp directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from metaeval.agents.cli.base import CLIAdapter
from metaeval.agents.cli.mini_trajectory import parse_mini_trajectory
from metaeval.agents.cli.stream import ParsedStream
from metaeval.agents.types import Limits, Task

if TYPE_CHECKING:
    from metaeval.sandbox.workspace import Workspace

TRAJECTORY_NAME = ".metaeval-mini-{key}.traj.json"


class MiniSweAgentAdapter(CLIAdapter):
    """mini-swe-agent's ``mini`` CLI, confirmation-free (``--yolo``), exiting when done.

    Text-based actions (``mini_textbased.yaml`` with ``model_class=litellm_textbased``): the
    tool-call mode needs litellm's optional ``mcp`` module and otherwise retries until the time
    limit. The trajectory goes to the run's private home (never into the workspace). On a
    gateway, litellm's OpenAI route is pointed at it (``OPENAI_BASE_URL``); cost tracking errors
    for the unknown model are ignored and litellm uses its bundled cost map (no download).
    """

    name: ClassVar[str] = "mini-swe-agent"
    default_binary: ClassVar[str] = "mini"
    product: ClassVar[str] = "mini-swe-agent"
    install_hint: ClassVar[str] = "pip install 'metaeval[mini]'"
    memory_mb: ClassVar[int | None] = 4096  # CPython: the address-space limit works
    credential_env: ClassVar[tuple[str, ...]] = (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "MSWEA_MODEL_NAME",
    )
    quiet_env: ClassVar[dict[str, str]] = {
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "NO_COLOR": "1",
    }
    text_mode_args: ClassVar[tuple[str, ...]] = (
        "-c",
        "mini_textbased.yaml",
        "-c",
        "model.model_class=litellm_textbased",
    )

    def gateway_env(self, base_url: str, home: Path, api_key: str) -> dict[str, str]:
        # litellm's OpenAI client sends it as Authorization: Bearer
        return {"OPENAI_BASE_URL": f"{base_url}/v1", "OPENAI_API_KEY": api_key}

    def gateway_args(self, base_url: str) -> list[str]:
        return ["-m", f"openai/{self.gateway_model}"]

    def trajectory_path(self, task: Task, workspace: Workspace) -> Path:
        """The run's trajectory file, in its private home."""
        key = hashlib.sha256(f"{task.id}\0{workspace.path}".encode()).hexdigest()[:12]
        return self.run_home() / TRAJECTORY_NAME.format(key=key)

    def build_argv(self, task: Task, workspace: Workspace, limits: Limits) -> list[str]:
        argv = [self.binary, "-t", task.instruction, "--yolo", "--exit-immediately"]
        argv += ["-o", str(self.trajectory_path(task, workspace)), *self.text_mode_args]
        if self.model:
            argv += ["-m", self.model]
        return argv + self.extra_args

    def cleanup(self, task: Task, workspace: Workspace) -> None:
        with contextlib.suppress(OSError):
            self.trajectory_path(task, workspace).unlink()

    def parse_output(self, stdout: str, task: Task, workspace: Workspace) -> ParsedStream:
        host = self.trajectory_path(task, workspace)
        try:
            data = json.loads(host.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return ParsedStream(error=f"mini-swe-agent wrote no trajectory file at {host}")
        except (OSError, json.JSONDecodeError) as exc:
            return ParsedStream(error=f"unreadable mini-swe-agent trajectory {host}: {exc}")
        return parse_mini_trajectory(data)
