"""From the options of `audit run` and `audit agent-run` to the settings of the run.

`resolve_run` reads the models file (`--models`, models_file.py), checks the options (tier,
sandbox, pull policy, host variable names), gives the provider options (`-M`,
`--model-base-url`, `--model-timeout`, `--max-connections`) to every model the process
creates, keeps the audit's own `-M` keys (`call_options.py`) for the model calls (a model of
the file overrides them with its own), and keeps a resumed run's output budget unless
`--max-tokens` is given.
`resolve_agent_run` does the same for `audit agent-run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from metaeval.cli_options import apply_model_options, host_env_names, parse_model_args
from metaeval.errors import ConfigError
from metaeval.protocols.audit.call_options import AUDIT_KEYS, PAPER_MAX_TOKENS, split_model_args
from metaeval.protocols.audit.findings import parse_evidence_tier
from metaeval.protocols.audit.models_file import load_models_file, resolve_models
from metaeval.protocols.audit.settings import AuditSettings, default_concurrency
from metaeval.records.layers import recorded_setting
from metaeval.tasks.images import PULL_POLICIES

if TYPE_CHECKING:
    from metaeval.protocols.audit.cells.agent_run import AgentRunSettings

DEFAULT_MODEL = "local/smollm2"
TIERS = ("minimal", "definition", "execution")
SANDBOXES = ("auto", "docker", "podman", "bwrap")


@dataclass
class ModelFlags:
    """The provider options of a command, as given (`metaeval.cli_options`)."""

    model_args: list[str] | None = None
    base_url: str | None = None
    timeout: float | None = None
    max_connections: int | None = None


@dataclass
class RunOptions:
    """The options of `audit run`, as given on the command line."""

    bench_dir: Path
    models: list[str] | None = None
    static_only: bool = False
    tier: str = "definition"
    agent_results: Path | None = None
    agent: str | None = None
    output: Path | None = None
    tasks: list[str] | None = None
    concurrency: int | None = None
    flags: ModelFlags | None = None
    max_tokens: int | None = None
    no_execution: bool = False
    new_layer: str | None = None
    sandbox: str = "auto"
    pull: str = "never"
    allow_host_env: list[str] | None = None
    min_tier: str | None = None
    models_file: Path | None = None


def default_run_dir(bench_dir: Path) -> Path:
    """`runs/audit-<benchmark directory name>`: where `audit run` writes without `-o`."""
    return Path("runs") / f"audit-{bench_dir.resolve().name}"


def default_agent_run_dir(bench_dir: Path) -> Path:
    """`runs/agent-<benchmark directory name>`: where `audit agent-run` writes without `-o`."""
    return Path("runs") / f"agent-{bench_dir.resolve().name}"


def resolve_run(o: RunOptions) -> AuditSettings:
    """The settings of an audit run; a bad option is a ConfigError naming it."""
    from metaeval.models.registry import prefetch_sdks

    flags = o.flags or ModelFlags()
    listed = load_models_file(o.models_file) if o.models_file is not None else None
    from_file = [entry.model for entry in listed.models] if listed else []
    given = list(o.models or ([] if from_file else [DEFAULT_MODEL]))  # -m beside the file
    models = [] if o.static_only else list(dict.fromkeys([*from_file, *given]))
    prefetch_sdks(models)  # the provider SDK imports while the run plans
    audit_pairs = [p for p in flags.model_args or [] if p.partition("=")[0].strip() in AUDIT_KEYS]
    run_dir = o.output or default_run_dir(o.bench_dir)
    max_tokens = o.max_tokens
    if max_tokens is None:  # a resumed run keeps its budget; a new one gets the paper's
        max_tokens = recorded_setting(run_dir, "max_tokens") or PAPER_MAX_TOKENS
    call, max_tokens = split_model_args(parse_model_args(audit_pairs), max_tokens)
    provider_pairs = [p for p in flags.model_args or [] if p not in audit_pairs]
    apply_model_options(provider_pairs, flags.base_url, flags.timeout, flags.max_connections)
    check_choices(o.tier, o.sandbox, o.pull)
    per_model = resolve_models(listed, call, max_tokens, str(o.models_file)) if listed else {}
    return AuditSettings(
        bench_dir=o.bench_dir,
        run_dir=run_dir,
        models=models,
        static_only=o.static_only,
        tier=o.tier,  # type: ignore[arg-type]
        agent_results=o.agent_results,
        agent=o.agent,
        task_filter=list(o.tasks or []),
        concurrency=o.concurrency or default_concurrency(o.static_only),
        max_tokens=max_tokens,
        model_call=call,
        per_model=per_model,
        execution_checks=not o.no_execution,
        new_layer=o.new_layer,
        sandbox=o.sandbox,
        pull=o.pull,
        host_env=host_env_names(o.allow_host_env or []),
        min_tier=parse_evidence_tier(o.min_tier),
    )


def check_choices(tier: str, sandbox: str, pull: str) -> None:
    """Refuse an unknown tier, sandbox or pull policy, naming the option."""
    if tier not in TIERS:
        raise ConfigError(f"unknown tier '{tier}' (minimal, definition, execution)", field="tier")
    if sandbox not in SANDBOXES:
        raise ConfigError(
            f"unknown sandbox '{sandbox}' (auto, docker, podman, bwrap)", field="sandbox"
        )
    if pull not in PULL_POLICIES:
        raise ConfigError(f"unknown pull policy '{pull}' (never, missing, always)", field="pull")


@dataclass
class AgentRunOptions:
    """The options of `audit agent-run`, as given on the command line."""

    bench_dir: Path
    agent: str
    output: Path | None = None
    tasks: list[str] | None = None
    concurrency: int = 1
    time_limit: float | None = None
    max_steps: int = 30
    memory_mb: int | None = None
    flags: ModelFlags | None = None
    new_layer: str | None = None
    allow_host_env: list[str] | None = None
    sandbox: str = "bwrap"


def resolve_agent_run(o: AgentRunOptions) -> AgentRunSettings:
    """The settings of an agent-run (the provider options go to every model it creates)."""
    from metaeval.protocols.audit.cells.agent_run import AgentRunSettings

    flags = o.flags or ModelFlags()
    apply_model_options(flags.model_args, flags.base_url, flags.timeout, flags.max_connections)
    return AgentRunSettings(
        bench_dir=o.bench_dir,
        out_dir=o.output or default_agent_run_dir(o.bench_dir),
        agent=o.agent,
        task_filter=list(o.tasks or []),
        concurrency=o.concurrency,
        time_limit_s=o.time_limit,
        max_steps=o.max_steps,
        memory_cgroup_mb=o.memory_mb,
        new_layer=o.new_layer,
        host_env=host_env_names(o.allow_host_env or []),
        sandbox=o.sandbox,
    )
