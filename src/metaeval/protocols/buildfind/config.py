"""The build-and-find run config (YAML): tasks, builders, finders, trials, seeds, budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from metaeval.config_files import read_mapping, validate
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.seeds import DEFAULT_SEED0
from metaeval.protocols.buildfind.views.specs import ViewSpec, resolve_view
from metaeval.records.names import SafeName

Control = Literal["question_only", "spec_only"]
DEFAULT_CONTROLS: tuple[Control, ...] = ("question_only", "spec_only")
# Sane maxima: a typo such as `r_find: 10000000` is an error, not a plan that never ends.
MAX_TRIALS = 1000
MAX_STEPS = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_FIND_CELLS_PER_TASK = 100_000
MAX_CONFIG_BYTES = 256 * 1024  # thousands of agents fit in a few dozen KiB


class AgentSpec(BaseModel):
    """One builder or finder configuration.

    `agent` is a registry agent id: toolloop, a CLI adapter (claude-code, codex, gemini-cli,
    mini-swe-agent), `reference:<documented|terse|divergent>` (scripted reference builders) or
    `reference-finder` (a scripted finder that answers from the pack's expected answers).
    `max_steps` overrides `budgets.build_max_steps` / `find_max_steps` for this agent (e.g. a
    slow local model next to a scripted finder that reads every file).

    `effort` reaches the agent: codex `-c model_reasoning_effort=E`, claude-code `--effort E`,
    gemini-cli a thinking budget in its settings.json (a model must be named); other agents
    record it as not applicable ("default": the agent's own default). `base_url` and
    `api_key_env` (the NAME of a host variable holding the key, never the key) point this agent
    at its own provider endpoint; `env` adds variables to a CLI's environment; `cli_args` are
    appended to a CLI's command line; `model_options` go to the toolloop agent's model
    (e.g. max_tokens_param, json_mode; see the provider modules).
    """

    model_config = ConfigDict(extra="forbid")

    name: SafeName  # becomes a directory under artifacts/
    agent: str
    model: str | None = None
    effort: str = "default"
    family: str = "unknown"
    max_steps: int | None = Field(default=None, ge=1)  # overrides the budgets' step limit
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    env: dict[str, str] = Field(default_factory=dict)
    cli_args: list[str] = Field(default_factory=list)
    model_options: dict[str, Any] = Field(default_factory=dict)


class Budgets(BaseModel):
    """Limits per agent run; time budgets default to the task's own build/find budgets."""

    model_config = ConfigDict(extra="forbid")

    build_time_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    find_time_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    build_max_steps: int = Field(default=60, ge=1, le=MAX_STEPS)
    find_max_steps: int = Field(default=12, ge=1, le=MAX_STEPS)
    find_max_tokens_per_step: int = Field(default=2048, ge=64, le=1_000_000)


class RunConfig(BaseModel):
    """A whole build-and-find run; paths are resolved relative to the config file."""

    model_config = ConfigDict(extra="forbid")

    pack: Path
    tasks: list[SafeName] = Field(default_factory=list)  # empty: every task of the pack
    builders: list[AgentSpec] = Field(min_length=1)
    finders: list[AgentSpec] = Field(min_length=1)
    r_build: int = Field(default=1, ge=1, le=MAX_TRIALS)
    r_find: int = Field(default=3, ge=1, le=MAX_TRIALS)
    seed0: int = DEFAULT_SEED0
    budgets: Budgets = Field(default_factory=Budgets)
    controls: list[Control] = Field(default_factory=lambda: list(DEFAULT_CONTROLS))
    concurrency: int = Field(default=1, ge=1, le=256)
    base_finders: list[SafeName] = Field(default_factory=list)  # for consensus prelabels
    max_recovery_attempts: int = Field(default=2, ge=0, le=20)
    # restricted finder views (ablations, a separate evidence layer): preset names or globs
    views: list[ViewSpec] = Field(default_factory=list)
    # effort panels of the analysis: matched (high builders with high finders, low with low,
    # as the paper) or cross (every builder-effort x finder-effort pair its own panel)
    panels: Literal["matched", "cross"] = "matched"
    # which formal pairs are run: all (every finder on every builder) or matched (a finder
    # reads only builders of its own effort; no work on pairs matched panels leave out)
    find_pairs: Literal["all", "matched"] = "all"
    # a finder answer holding no JSON object is run once more with a short reminder
    retry_unparsable: bool = False

    @field_validator("views", mode="before")
    @classmethod
    def _presets(cls, value: object) -> object:
        if not isinstance(value, list):
            return value
        return [resolve_view(v) if isinstance(v, str) else v for v in value]

    @model_validator(mode="after")
    def _names_unique_and_known(self) -> RunConfig:
        for role in ("builders", "finders"):
            names = [a.name for a in getattr(self, role)]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {role[:-1]} name(s): {', '.join(dupes)}")
        if self.find_pairs == "matched" and self.panels == "cross":
            raise ValueError("find_pairs: matched runs no cross pairs for panels: cross to use")
        cells = (len(self.builders) * self.r_build + len(self.controls)) * len(self.finders)
        if cells * self.r_find > MAX_FIND_CELLS_PER_TASK:
            raise ValueError(
                f"{cells * self.r_find} find cells per task (builders x r_build + controls, "
                f"times finders x r_find); at most {MAX_FIND_CELLS_PER_TASK} are allowed"
            )
        finders = {f.name for f in self.finders}
        unknown = [n for n in self.base_finders if n not in finders]
        if unknown:
            raise ValueError(f"base_finders not among finders: {', '.join(unknown)}")
        views = [v.name for v in self.views]
        dupes = sorted({n for n in views if views.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate view name(s): {', '.join(dupes)}")
        return self


def load_config(path: Path) -> RunConfig:
    """Parse and validate a run config (YAML, or JSON for a ``.json`` file) with the shared
    strict reader; errors name the file and the field."""
    if not path.exists():
        raise ConfigError("run config not found", file=str(path))
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:  # refused before parsing: YAML takes seconds per MiB
        raise ConfigError(
            f"run config is {size} bytes, more than the {MAX_CONFIG_BYTES} a run config may "
            "have (it lists agents and settings; the pack holds the tasks)",
            file=str(path),
        )
    config = validate(RunConfig, read_mapping(path, max_bytes=MAX_CONFIG_BYTES), file=path)
    if not config.pack.is_absolute():
        config.pack = (path.parent / config.pack).resolve()
    return config
