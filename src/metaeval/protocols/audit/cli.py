"""`metaeval audit ...`: run, score, review, report, convert."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from metaeval.cli_options import (
    AllowHostEnv,
    MaxConnections,
    ModelArgs,
    ModelBaseUrl,
    ModelTimeout,
    host_env_names,
)
from metaeval.console import make_console
from metaeval.exit_codes import CellFailure, report_failures
from metaeval.protocols.audit.call_options import PAPER_MAX_TOKENS
from metaeval.protocols.audit.scaffold import init_cmd
from metaeval.records.layers import recorded_setting

MinTier = Annotated[
    str | None,
    typer.Option(
        "--min-tier",
        help="Count only findings with evidence this strong: executed, self-contained "
        "(also executed), assumed (all), or any.",
        show_default=False,
    ),
]

audit_app = typer.Typer(
    help="Audit an agent benchmark for defects (BenchGuard).", no_args_is_help=True
)
out = make_console(markup=False)  # printed text holds user paths and names, never markup
audit_app.command("init")(init_cmd)


def _default_run_dir(bench_dir: Path) -> Path:
    return Path("runs") / f"audit-{bench_dir.resolve().name}"


@audit_app.command("run")
def run_cmd(
    bench_dir: Annotated[Path, typer.Argument(help="Benchmark root (Harbor task directories).")],
    model: Annotated[
        list[str] | None,
        typer.Option("--model", "-m", help="provider/model; repeat for an ensemble."),
    ] = None,
    static_only: Annotated[
        bool, typer.Option(help="Static and execution checks only, no model.")
    ] = False,
    tier: Annotated[str, typer.Option(help="minimal | definition | execution")] = "definition",
    agent_results: Annotated[
        Path | None,
        typer.Option(help="Agent results per task (execution tier), e.g. an agent-run's -o DIR."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Execution tier: run this agent on every task first (as `audit agent-run`, "
            "into RUN_DIR/agent_results) and audit with its results, e.g. "
            "claude-code:local/smollm2."
        ),
    ] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Run directory.")] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Audit only these task ids.")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Jobs in flight at once (default: one per core with --static-only, else 1).",
            show_default=False,
        ),
    ] = None,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=64,
            help="Output budget per model call (the paper's 4096; -M max_tokens). Resuming "
            "a run keeps the budget it was started with unless this is given.",
        ),
    ] = None,
    no_execution: Annotated[
        bool, typer.Option(help="Skip the sandboxed oracle/null-agent runs.")
    ] = False,
    new_layer: Annotated[str | None, typer.Option(help="Start a new evidence layer.")] = None,
    sandbox: Annotated[
        str,
        typer.Option(
            help="Execution backend: auto (a working Docker/Podman for tasks with an "
            "environment, bubblewrap for the rest), docker, podman, or bwrap."
        ),
    ] = "auto",
    pull: Annotated[
        str,
        typer.Option(
            help="Pull task images before their build/run: never (default: offline, only "
            "images the engine holds), missing (pull those it lacks), always."
        ),
    ] = "never",
    allow_host_env: AllowHostEnv = None,
    min_tier: MinTier = None,
) -> None:
    """Audit every task of BENCH_DIR; re-running resumes."""
    from metaeval.cli_options import apply_model_options, parse_model_args
    from metaeval.errors import ConfigError
    from metaeval.models.registry import prefetch_sdks
    from metaeval.protocols.audit.call_options import AUDIT_KEYS, split_model_args
    from metaeval.protocols.audit.findings import parse_evidence_tier
    from metaeval.protocols.audit.run import AuditRun, AuditSettings, default_concurrency
    from metaeval.tasks.images import PULL_POLICIES

    models = [] if static_only else list(model or ["local/smollm2"])
    prefetch_sdks(models)  # the provider SDK imports while the run plans
    audit_pairs = [p for p in model_arg or [] if p.partition("=")[0].strip() in AUDIT_KEYS]
    run_dir = output or _default_run_dir(bench_dir)
    if max_tokens is None:  # a resumed run keeps its budget; a new one gets the paper's
        max_tokens = recorded_setting(run_dir, "max_tokens") or PAPER_MAX_TOKENS
    call, max_tokens = split_model_args(parse_model_args(audit_pairs), max_tokens)
    provider_pairs = [p for p in model_arg or [] if p not in audit_pairs]
    apply_model_options(provider_pairs, model_base_url, model_timeout, max_connections)
    if tier not in ("minimal", "definition", "execution"):
        raise ConfigError(f"unknown tier '{tier}' (minimal, definition, execution)", field="tier")
    if sandbox not in ("auto", "docker", "podman", "bwrap"):
        raise ConfigError(
            f"unknown sandbox '{sandbox}' (auto, docker, podman, bwrap)", field="sandbox"
        )
    if pull not in PULL_POLICIES:
        raise ConfigError(f"unknown pull policy '{pull}' (never, missing, always)", field="pull")
    host_env = host_env_names(allow_host_env or [])
    summary = AuditRun(
        AuditSettings(
            bench_dir=bench_dir,
            run_dir=run_dir,
            models=models,
            static_only=static_only,
            tier=tier,  # type: ignore[arg-type]
            agent_results=agent_results,
            agent=agent,
            task_filter=list(task or []),
            concurrency=concurrency or default_concurrency(static_only),
            max_tokens=max_tokens,
            model_call=call,
            execution_checks=not no_execution,
            new_layer=new_layer,
            sandbox=sandbox,
            pull=pull,
            host_env=host_env,
            min_tier=parse_evidence_tier(min_tier),
        )
    ).run()
    if summary["skipped_completed"]:
        out.print(f"resumed: {summary['skipped_completed']} completed cell(s) reused")
    out.print(
        f"{summary['findings_reported']} findings on {summary['tasks']} tasks "
        f"({summary.get('tasks_flagged', 0)} flagged; "
        f"{summary['findings_suppressed']} below 0.3 suppressed); "
        f"audit failures {len(summary['audit_failures'])}, infra errors {summary['infra_errors']}"
    )
    evidence = summary.get("findings_by_evidence") or {}
    if evidence:
        shown = ", ".join(
            f"{k} {evidence[k]}" for k in ("executed", "self-contained", "assumed") if k in evidence
        )
        below = summary.get("findings_below_min_tier")
        out.print(f"evidence: {shown}" + (f"; {below} below --min-tier left out" if below else ""))
    for line in summary.get("execution") or []:
        if not line.startswith("disabled ("):  # --no-execution: the user knows
            out.print(f"execution checks: {line}")
    out.print(f"report: {run_dir / 'report.md'} and {run_dir / 'report.html'}")
    gold = bench_dir / "gold.json"
    if gold.is_file():
        out.print(
            f"known issues beside the benchmark: metaeval audit score {run_dir} --gold {gold} "
            "--judge category (a rule judge, no model; or --judge provider/model)"
        )
    raise typer.Exit(report_failures(out, cell_failures(summary.get("failed_cells") or [])))


def cell_failures(failed: list[dict]) -> list[CellFailure]:
    """The summary's failed cells for the console: an infrastructure error is retried on a
    rerun; any other failure (the model's output unusable, a task the checks cannot read) is
    final."""
    return [
        CellFailure(
            "infra errors" if row["kind"] == "infra_error" else "failed cells",
            f"{row['source']}: {row['reason']}",
            retried=row["kind"] == "infra_error",
        )
        for row in failed
    ]


@audit_app.command("agent-run")
def agent_run_cmd(
    bench_dir: Annotated[Path, typer.Argument(help="Benchmark root (Harbor task directories).")],
    agent: Annotated[
        str,
        typer.Option(
            help="The agent: CLI:MODEL (claude-code:local/smollm2, codex:replay/FILE, "
            "mini-swe-agent:openai/gpt-4.1-mini), a CLI with its own model, or toolloop."
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Results directory (give it to --agent-results)."),
    ] = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only these task ids.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks in flight at once.")] = 1,
    time_limit: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Seconds per agent run (default: the agent timeout_sec of task.toml, else 600).",
        ),
    ] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Agent turns per task.")] = 30,
    memory_mb: Annotated[
        int | None,
        typer.Option(min=64, help="cgroup memory cap of a CLI agent in MiB (default 4096)."),
    ] = None,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
    new_layer: Annotated[str | None, typer.Option(help="Start a new evidence layer.")] = None,
    allow_host_env: AllowHostEnv = None,
) -> None:
    """Run an agent on every task in its sandbox, score it with the task's tests, and write
    the agent results the execution tier reads; re-running resumes."""
    from metaeval.cli_options import apply_model_options
    from metaeval.protocols.audit.cells.agent_run import AgentRuns, AgentRunSettings

    apply_model_options(model_arg, model_base_url, model_timeout, max_connections)
    run_dir = output or Path("runs") / f"agent-{bench_dir.resolve().name}"
    summary = AgentRuns(
        AgentRunSettings(
            bench_dir=bench_dir,
            out_dir=run_dir,
            agent=agent,
            task_filter=list(task or []),
            concurrency=concurrency,
            time_limit_s=time_limit,
            max_steps=max_steps,
            memory_cgroup_mb=memory_mb,
            new_layer=new_layer,
            host_env=host_env_names(allow_host_env or []),
        )
    ).run()
    if summary["skipped_completed"]:
        out.print(f"resumed: {summary['skipped_completed']} finished agent run(s) reused")
    classes = ", ".join(f"{k} {v}" for k, v in summary["classifications"].items())
    out.print(
        f"{summary['tasks']} tasks: {summary['passed']} passed their tests "
        f"(mean reward {summary['mean_reward']}); runs: {classes}; "
        f"infra errors {summary['infra_errors']}"
    )
    out.print(
        f"agent results: {run_dir} (metaeval audit run {bench_dir} --tier execution "
        f"--agent-results {run_dir})"
    )


@audit_app.command("score")
def score_cmd(
    run_dir: Annotated[Path, typer.Argument(help="An audit run directory.")],
    gold: Annotated[Path, typer.Option(help="Known issues (gold.json).")],
    judge: Annotated[
        str,
        typer.Option(
            help="Alignment judge: a provider/model, or 'category' for the rule judge (same "
            "subcategory = aligned, same category = partial; no model)."
        ),
    ] = "local/smollm2",
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
    min_tier: MinTier = None,
) -> None:
    """Score findings against known issues: recall, flagged-task precision, per category."""
    from metaeval.cli_options import apply_model_options
    from metaeval.protocols.audit.findings import parse_evidence_tier
    from metaeval.protocols.audit.render import score_run

    apply_model_options(model_arg, model_base_url, model_timeout, max_connections)

    report = score_run(run_dir, gold, judge, parse_evidence_tier(min_tier))
    out.print(report.to_markdown(), markup=False, highlight=False, soft_wrap=True)
    if judge == "category":
        out.print(
            "note: judged by category match (no model); it cannot tell apart two defects of one "
            "subcategory. Use a strong model judge for numbers you publish.",
            style="yellow",
        )
    elif judge.startswith("local/"):
        out.print(
            f"warning: judge {judge} is a small local model; its verdicts are not reliable. "
            "Use a strong judge (e.g. --judge openai/gpt-4.1) for numbers you publish.",
            style="yellow",
        )
    out.print(f"scores: {run_dir / 'score.json'}; report updated: {run_dir / 'report.html'}")


@audit_app.command("review")
def review_cmd(
    run_dir: Annotated[Path, typer.Argument(help="An audit run directory.")],
    to_gold: Annotated[
        Path | None,
        typer.Option(
            "--to-gold",
            help="Write the confirmed findings of the sheet as a gold file (added to it when "
            "it exists) instead of writing the sheet.",
        ),
    ] = None,
) -> None:
    """Write the review sheet RUN_DIR/review.csv (verdicts given before are kept): mark each
    finding confirmed, rejected or unsure, with a note; `audit score` reads it."""
    from metaeval.protocols.audit.review_results import review_cli

    for line in review_cli(run_dir, to_gold):
        out.print(line, markup=False, highlight=False, soft_wrap=True)


@audit_app.command("report")
def report_cmd(run_dir: Annotated[Path, typer.Argument(help="An audit run directory.")]) -> None:
    """Re-render report.md and report.html from the run's records."""
    from metaeval.protocols.audit.render import rerender

    paths = rerender(run_dir)
    out.print("written: " + ", ".join(str(p) for p in paths))


@audit_app.command("convert")
def convert_cmd(
    src: Annotated[Path, typer.Argument(help="A Terminal-Bench 1 task, or a folder of them.")],
    dst: Annotated[Path, typer.Argument(help="Destination (Harbor layout).")],
) -> None:
    """Convert Terminal-Bench 1 task(s) into Harbor task directories."""
    from metaeval.tasks.sources.terminal_bench import convert_tb1_benchmark, convert_tb1_task

    if (src / "task.yaml").is_file():
        by_task = {src.name: convert_tb1_task(src, dst)}
    else:
        by_task = convert_tb1_benchmark(src, dst)
    for task_id, notes in by_task.items():
        for note in notes:
            out.print(f"note: {task_id}: {note}", markup=False, soft_wrap=True)
    out.print(f"converted {len(by_task)} task(s) into {dst}")
