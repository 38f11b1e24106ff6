"""Gemini CLI adapter: ``gemini -p <prompt> --output-format stream-json [--model M] [--yolo]``.

Its output is read by `metaeval.agents.cli.gemini_stream` (the stream format, the usage
fields and what the stream leaves out are described there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from metaeval.agents.cli.base import CLIAdapter
from metaeval.agents.cli.gemini_stream import fill_gemini_results, parse_gemini_stream
from metaeval.agents.cli.stream import ParsedStream
from metaeval.agents.types import Limits, Task, TranscriptEvent

if TYPE_CHECKING:
    from metaeval.sandbox.workspace import Workspace

GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


class GeminiCliAdapter(CLIAdapter):
    """Gemini CLI in headless mode with streaming JSON.

    ``--yolo`` (auto-approve every tool) only when the task allows writing; without it,
    headless Gemini CLI runs only the tools that need no confirmation (reads and searches).
    ``--skip-trust`` always (an untrusted folder makes it exit 55). The private home gets a
    ``.gemini/settings.json`` selecting API-key auth (the base URL alone selects a login that
    headless mode rejects with exit 41) and switching off usage statistics and updates; on a
    gateway also ``general.maxAttempts = 1`` (it otherwise retries a failing model ten times
    with backoff, ignoring ``x-should-retry``).
    """

    name: ClassVar[str] = "gemini-cli"
    default_binary: ClassVar[str] = "gemini"
    product: ClassVar[str] = "Gemini CLI"
    credential_env: ClassVar[tuple[str, ...]] = (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_GENAI_USE_VERTEXAI",
    )
    quiet_env: ClassVar[dict[str, str]] = {
        "GEMINI_TELEMETRY_ENABLED": "false",
        "NO_COLOR": "1",
        "NO_BROWSER": "1",
    }

    # effort -> thinkingConfig.thinkingBudget (tokens) of the model's generateContentConfig,
    # set in settings.json as a `modelConfigs.overrides` rule matching the run's model
    efforts: ClassVar[tuple[str, ...]] = ("none", "low", "medium", "high")
    thinking_budgets: ClassVar[dict[str, int]] = {
        "none": 0,
        "low": 1024,
        "medium": 8192,
        "high": 24576,
    }

    def effort_model(self, on_gateway: bool) -> str | None:
        """The model name the effort override matches (None: no model named, not applied)."""
        return self.gateway_model if on_gateway else self.model

    def effort_note(self) -> str:
        model = self.effort_model(self._gateway() is not None)
        if model is None:
            return "not applied (gemini-cli: name a model so the thinking budget can match it)"
        budget = self.thinking_budgets[self.effort or ""]
        return f"settings.json modelConfigs.overrides[{model}].thinkingBudget={budget}"

    def prepare_home(self, home: Path, task: Task, on_gateway: bool) -> None:
        settings = json.loads(json.dumps(GEMINI_SETTINGS))
        if on_gateway:  # the gateway's model already retries as its provider allows
            settings["general"]["maxAttempts"] = 1
        model = self.effort_model(on_gateway)
        if self.effort is not None and model is not None:
            budget = self.thinking_budgets[self.effort]
            config = {"generateContentConfig": {"thinkingConfig": {"thinkingBudget": budget}}}
            settings["modelConfigs"] = {
                "overrides": [{"match": {"model": model}, "modelConfig": config}]
            }
        if self.allowed_tools is not None:  # the allow-list of built-in tools
            settings["tools"] = {"core": list(self.allowed_tools)}
        path = home / ".gemini" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2))

    def gateway_env(self, base_url: str, home: Path, api_key: str) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_API_KEY": api_key}  # x-goog-api-key

    def endpoint_env(self, base_url: str | None, api_key: str | None) -> dict[str, str]:
        env = {"GOOGLE_GEMINI_BASE_URL": base_url} if base_url else {}
        return env | ({"GEMINI_API_KEY": api_key} if api_key else {})

    def gateway_args(self, base_url: str) -> list[str]:
        # A named model: "auto" would first ask a router model for a JSON verdict.
        return ["--model", self.gateway_model]

    def build_argv(self, task: Task, workspace: Workspace, limits: Limits) -> list[str]:
        argv = [self.binary, "-p", task.instruction, "--output-format", "stream-json"]
        argv.append("--skip-trust")
        if self.model:
            argv += ["--model", self.model]
        if task.allow_write:
            argv.append("--yolo")
        return argv + self.extra_args

    def parse_output(self, stdout: str, task: Task, workspace: Workspace) -> ParsedStream:
        return parse_gemini_stream(stdout.splitlines())

    def fill_from_gateway(
        self, transcript: list[TranscriptEvent], delivered: dict[str, str]
    ) -> list[TranscriptEvent]:
        """Empty results (read_file, grep_search, ... show nothing in the stream) get the text
        the model was given; a whole-file ``read_file`` also gets its span."""
        return fill_gemini_results(transcript, delivered)
