"""The resolved settings of one audit run, their checks, and what of them the manifest holds.

`AuditSettings` is what `audit run` (and the demo) hand to `AuditRun`. `validate` refuses
settings that cannot run, naming the option. The manifest records three views of them:
`run_config` (the resolved configuration, `config`), `meaning_settings` (the settings a rerun
must keep, compared by `RunDir.open`) and `input_hashes` (the prompts and the price table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaeval.engine.executor import available_cores
from metaeval.errors import ConfigError
from metaeval.models.pricing import price_table
from metaeval.protocols.audit.call_options import PAPER_MAX_TOKENS, ModelCallOptions
from metaeval.protocols.audit.models_file import ModelSettings
from metaeval.protocols.audit.prompts import PROMPT_TEMPLATES, AuditProtocol
from metaeval.protocols.audit.task_view import InputTier

AGENT_RESULTS_SUBDIR = "agent_results"
"""Where `--agent` puts its agent-run inside the audit run directory."""


@dataclass
class AuditSettings:
    """Resolved configuration of one audit run (goes into the manifest)."""

    bench_dir: Path
    run_dir: Path
    models: list[str] = field(default_factory=list)
    static_only: bool = False
    tier: InputTier = "definition"
    agent_results: Path | None = None
    agent: str | None = None  # execution tier: run this agent first (see cells/agent_run.py)
    task_filter: list[str] = field(default_factory=list)
    concurrency: int = 1
    max_tokens: int = PAPER_MAX_TOKENS
    # temperature and what each answer may hold (call_options.py; `-M` keys of `audit run`)
    model_call: ModelCallOptions = field(default_factory=ModelCallOptions)
    # a model's own settings (`--models FILE`, models_file.py); the others use the two above
    per_model: dict[str, ModelSettings] = field(default_factory=dict)
    execution_checks: bool = True
    new_layer: str | None = None
    progress: bool | None = None
    sandbox: str = "auto"  # execution backend: auto, docker, podman, bwrap
    # `--pull`: which task images the engine pulls first: never (the default: offline, no
    # registry call), missing, always (docs/audit-execution.md)
    pull: str = "never"
    # Host variables task.toml's [verifier.env] / [solution.env] may read as ${NAME}
    # (`metaeval.tasks.limits`); none by default. Names only: values are never recorded.
    host_env: tuple[str, ...] = ()
    # Task ids the models audit (None: every task); static and execution checks still run on
    # every task. The demo uses it to keep the slow local-model step to a few tasks.
    model_tasks: list[str] | None = None
    # `--min-tier`: the summary and reports show only findings with evidence this strong
    # (all findings are recorded either way).
    min_tier: str | None = None

    def model_settings(self, name: str) -> ModelSettings:
        """What model `name` is called with: its own settings, else the run's."""
        own = self.per_model.get(name)
        return own or ModelSettings(call=self.model_call, max_tokens=self.max_tokens)

    def protocol_name(self) -> AuditProtocol:
        return "execution" if self.tier == "execution" else "definition"


def default_concurrency(static_only: bool) -> int:
    """Jobs in flight when the user gives none: one per core for static and execution checks
    alone (sandboxed processes), else 1."""
    return available_cores() if static_only else 1


def validate(settings: AuditSettings) -> None:
    """Refuse settings that cannot run, naming the option."""
    if not settings.bench_dir.is_dir():
        raise ConfigError("benchmark directory not found", file=str(settings.bench_dir))
    if not settings.static_only and not settings.models:
        raise ConfigError("give at least one --model, or --static-only", field="model")
    if settings.agent is not None:
        if settings.tier != "execution":
            raise ConfigError("--agent needs --tier execution", field="agent")
        if settings.agent_results is not None:
            raise ConfigError("give --agent or --agent-results, not both", field="agent")
        return
    if settings.tier == "execution" and settings.agent_results is None:
        raise ConfigError(
            "--tier execution needs --agent-results DIR or --agent SPEC", field="agent_results"
        )
    if settings.agent_results is not None and not settings.agent_results.is_dir():
        raise ConfigError("agent results directory not found", file=str(settings.agent_results))


def input_hashes() -> dict[str, str]:
    """The run's inputs but the benchmark: the prompt templates and the price table."""
    hashes = {f"prompt:{name}": text for name, text in PROMPT_TEMPLATES.items()}
    hashes["price_table"] = price_table().sha256
    return hashes


def meaning_settings(s: AuditSettings) -> dict[str, Any]:
    """The settings that change what a cell means, compared on a rerun (`RunDir.open`):
    the execution checks and their sandbox, the input tier and agent results the models
    see, their token limit, the host variables tasks may read. Which tasks and models
    run, and how many at once, only select cells and are left out."""
    return {
        "execution_checks": s.execution_checks,
        "sandbox": s.sandbox,
        # only when not the default: a run made before `--pull` existed still resumes
        **({"pull": s.pull} if s.pull != "never" else {}),
        "tier": s.tier,
        "agent_results": str(s.agent_results) if s.agent_results else None,
        "agent": s.agent,
        "max_tokens": s.max_tokens,
        **s.model_call.settings(),
        "host_env": sorted(s.host_env),
        # one setting per model of a models file: a model added later is a new setting,
        # a model's changed value is refused like any other
        **{f"model:{name}": own.recorded() for name, own in s.per_model.items()},
    }


def run_config(s: AuditSettings, task_dirs: list[Path]) -> dict[str, Any]:
    """The run's resolved configuration (the manifest's `config`) over the audited tasks."""
    return {
        "benchmark": str(s.bench_dir.resolve()),
        "models": s.models,
        "static_only": s.static_only,
        "tier": s.tier,
        "agent_results": str(s.agent_results) if s.agent_results else None,
        **({"agent": s.agent} if s.agent is not None else {}),
        "tasks": [str(d.relative_to(s.bench_dir).as_posix()) for d in task_dirs],
        "max_tokens": s.max_tokens,
        **s.model_call.settings(),
        "execution_checks": s.execution_checks,
        "sandbox": s.sandbox,
        "pull": s.pull,
        **({"host_env": list(s.host_env)} if s.host_env else {}),
        "concurrency": s.concurrency,
        **({"model_tasks": s.model_tasks} if s.model_tasks is not None else {}),
        **({"min_evidence_tier": s.min_tier} if s.min_tier else {}),
        **(
            {"model_settings": {n: own.recorded() for n, own in s.per_model.items()}}
            if s.per_model
            else {}
        ),
    }
