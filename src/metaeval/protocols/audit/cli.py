"""`metaeval audit ...`: run, score, review, report, convert."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Annotated

import typer

from metaeval.cli_options import (
    AllowHostEnv,
    MaxConnections,
    ModelArgs,
    ModelBaseUrl,
    ModelTimeout,
    Pull,
)
from metaeval.console import make_console
from metaeval.errors import ConfigError
from metaeval.exit_codes import report_failures
from metaeval.protocols.audit.scaffold import init_cmd

MinTier = Annotated[
    str | None,
    typer.Option(
        "--min-tier",
        help="Count only findings with evidence this strong: executed, self-contained "
        "(also executed), assumed (all), or any.",
        show_default=False,
    ),
]

BenchDir = Annotated[Path, typer.Argument(help="Benchmark root (Harbor task directories).")]
Models = Annotated[
    list[str] | None,
    typer.Option("--model", "-m", help="provider/model; repeat for an ensemble."),
]
StaticOnly = Annotated[bool, typer.Option(help="Static and execution checks only, no model.")]
AgentResults = Annotated[
    Path | None,
    typer.Option(help="Agent results per task (execution tier), e.g. an agent-run's -o DIR."),
]
AuditAgent = Annotated[
    str | None,
    typer.Option(
        help="Execution tier: run this agent on every task first (as `audit agent-run`, "
        "into RUN_DIR/agent_results) and audit with its results, e.g. "
        "claude-code:local/smollm2."
    ),
]
AuditTasks = Annotated[list[str] | None, typer.Option("--task", help="Audit only these task ids.")]
RunConcurrency = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Jobs in flight at once (default: one per core with --static-only, else 1).",
        show_default=False,
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        min=64,
        help="Output budget per model call (the paper's 4096; -M max_tokens). Resuming "
        "a run keeps the budget it was started with unless this is given.",
    ),
]
ModelsFile = Annotated[
    Path | None,
    typer.Option(
        "--models",
        help="A models file (YAML/JSON): several models, each with its own temperature, "
        "max_tokens, reasoning, key variable and provider options (docs/audit.md).",
        show_default=False,
    ),
]
NoExecution = Annotated[bool, typer.Option(help="Skip the sandboxed oracle/null-agent runs.")]
NewLayer = Annotated[str | None, typer.Option(help="Start a new evidence layer.")]
Sandbox = Annotated[
    str,
    typer.Option(
        help="Execution backend: auto (a working Docker/Podman for tasks with an "
        "environment, bubblewrap for the rest), docker, podman, or bwrap."
    ),
]
AgentSpec = Annotated[
    str,
    typer.Option(
        help="The agent: CLI:MODEL (claude-code:local/smollm2, codex:replay/FILE, "
        "mini-swe-agent:openai/gpt-4.1-mini), a CLI with its own model, toolloop, or the "
        "reference agents oracle (runs solution/solve.sh) and null (does nothing)."
    ),
]
AgentRunOutput = Annotated[
    Path | None,
    typer.Option("-o", "--output", help="Results directory (give it to --agent-results)."),
]
TimeLimit = Annotated[
    float | None,
    typer.Option(
        min=1,
        help="Seconds per agent run (default: the agent timeout_sec of task.toml, else 600).",
    ),
]
MemoryMb = Annotated[
    int | None,
    typer.Option(min=64, help="cgroup memory cap of a CLI agent in MiB (default 4096)."),
]

audit_app = typer.Typer(
    help="Audit an agent benchmark for defects (BenchGuard).", no_args_is_help=True
)
out = make_console(markup=False)  # printed text holds user paths and names, never markup
audit_app.command("init")(init_cmd)


@audit_app.command("run")
def run_cmd(
    bench_dir: BenchDir,
    model: Models = None,
    models: ModelsFile = None,
    static_only: StaticOnly = False,
    tier: Annotated[str, typer.Option(help="minimal | definition | execution")] = "definition",
    agent_results: AgentResults = None,
    agent: AuditAgent = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Run directory.")] = None,
    task: AuditTasks = None,
    concurrency: RunConcurrency = None,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
    max_tokens: MaxTokens = None,
    no_execution: NoExecution = False,
    new_layer: NewLayer = None,
    sandbox: Sandbox = "auto",
    pull: Pull = "never",
    allow_host_env: AllowHostEnv = None,
    min_tier: MinTier = None,
) -> None:
    """Audit every task of BENCH_DIR; re-running resumes."""
    from metaeval.protocols.audit.run import AuditRun
    from metaeval.protocols.audit.run_console import (
        cell_failures,
        left_alone_lines,
        of_this_run,
        run_lines,
    )
    from metaeval.protocols.audit.run_options import ModelFlags, RunOptions, resolve_run

    settings = resolve_run(
        RunOptions(
            bench_dir=bench_dir,
            models=model,
            static_only=static_only,
            tier=tier,
            agent_results=agent_results,
            agent=agent,
            output=output,
            tasks=task,
            concurrency=concurrency,
            flags=ModelFlags(model_arg, model_base_url, model_timeout, max_connections),
            max_tokens=max_tokens,
            no_execution=no_execution,
            new_layer=new_layer,
            sandbox=sandbox,
            pull=pull,
            allow_host_env=allow_host_env,
            min_tier=min_tier,
            models_file=models,
        )
    )
    summary = AuditRun(settings).run()
    for line in run_lines(summary, settings.run_dir, bench_dir):
        out.print(line)
    ours, others = of_this_run(summary.get("failed_cells") or [], settings.models)
    for line in left_alone_lines(others):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(report_failures(out, cell_failures(ours)))


@audit_app.command("plan")
def plan_cmd(
    bench_dir: BenchDir,
    model: Models = None,
    models: ModelsFile = None,
    tier: Annotated[str, typer.Option(help="minimal | definition | execution")] = "definition",
    agent_results: AgentResults = None,
    task: AuditTasks = None,
    model_arg: ModelArgs = None,
    max_tokens: MaxTokens = None,
) -> None:
    """Say what `audit run` with these options will call, with each model's settings and an
    estimate of the cost, before anything is spent (no call, nothing written)."""
    from metaeval.protocols.audit.cost_plan import plan_audit, plan_lines
    from metaeval.protocols.audit.run_options import ModelFlags, RunOptions, resolve_run

    settings = resolve_run(
        RunOptions(
            bench_dir=bench_dir,
            models=model,
            models_file=models,
            tier=tier,
            agent_results=agent_results,
            tasks=task,
            flags=ModelFlags(model_arg),
            max_tokens=max_tokens,
        )
    )
    n_tasks, plans = plan_audit(settings)
    for line in plan_lines(bench_dir, n_tasks, plans):
        out.print(line, markup=False, highlight=False, soft_wrap=True)


@audit_app.command("agent-run")
def agent_run_cmd(
    bench_dir: BenchDir,
    agent: AgentSpec,
    output: AgentRunOutput = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only these task ids.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks in flight at once.")] = 1,
    time_limit: TimeLimit = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Agent turns per task.")] = 30,
    memory_mb: MemoryMb = None,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
    new_layer: NewLayer = None,
    allow_host_env: AllowHostEnv = None,
    sandbox: Annotated[
        str,
        typer.Option(
            help="Where the agent works: bwrap (the task's bubblewrap root), or podman, "
            "docker or auto (a container of the task's image; built-in agents only: "
            "toolloop, scripted, oracle, null)."
        ),
    ] = "bwrap",
) -> None:
    """Run an agent on every task in its sandbox, score it with the task's tests, and write
    the agent results the execution tier reads; re-running resumes."""
    from metaeval.protocols.audit.cells.agent_run import AgentRuns
    from metaeval.protocols.audit.run_console import agent_run_lines
    from metaeval.protocols.audit.run_options import (
        AgentRunOptions,
        ModelFlags,
        resolve_agent_run,
    )

    settings = resolve_agent_run(
        AgentRunOptions(
            bench_dir=bench_dir,
            agent=agent,
            output=output,
            tasks=task,
            concurrency=concurrency,
            time_limit=time_limit,
            max_steps=max_steps,
            memory_mb=memory_mb,
            flags=ModelFlags(model_arg, model_base_url, model_timeout, max_connections),
            new_layer=new_layer,
            allow_host_env=allow_host_env,
            sandbox=sandbox,
        )
    )
    summary = AgentRuns(settings).run()
    for line in agent_run_lines(summary, settings.out_dir, bench_dir):
        out.print(line)


@audit_app.command("score")
def score_cmd(
    run_dir: Annotated[Path, typer.Argument(help="An audit run directory.")],
    gold: Annotated[Path, typer.Option(help="Known issues (gold.json).")],
    judge: Annotated[
        str | None,
        typer.Option(
            help="Alignment judge (required): a provider/model (a strong one for numbers you "
            "publish), or 'category' for the rule judge (same subcategory = aligned, same "
            "category = partial; no model)."
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Overwrite a score.json made by another judge."),
    ] = False,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
    min_tier: MinTier = None,
) -> None:
    """Score findings against known issues: recall, flagged-task precision, per category."""
    from metaeval.cli_options import apply_model_options
    from metaeval.protocols.audit.findings import parse_evidence_tier
    from metaeval.protocols.audit.gold import load_gold
    from metaeval.protocols.audit.records import SCORE_MD
    from metaeval.protocols.audit.render import earlier_judge, score_run

    apply_model_options(model_arg, model_base_url, model_timeout, max_connections)
    load_gold(gold)  # a bad gold file is named before anything else
    if judge is None:
        raise ConfigError(
            "choose the alignment judge: --judge category (the rule judge, no model) or "
            "--judge PROVIDER/MODEL (a strong model for numbers you publish)",
            field="--judge",
        )
    earlier = earlier_judge(run_dir)
    if earlier is not None and earlier != judge and not replace:
        raise ConfigError(
            f"it holds the score of judge {earlier!r}; scoring with {judge!r} would overwrite "
            "it: pass --replace to do so, or score a copy of the run",
            file=str(run_dir / "score.json"),
            field="judge",
        )
    if earlier is not None:
        out.print(f"replacing the earlier score.json (judge {earlier})", style="yellow")
    score_run(run_dir, gold, judge, parse_evidence_tier(min_tier))
    # score.md as written: the scores, then the tables by subcategory (Table 6) and cost
    # (its entities decoded for the terminal: control characters stay escaped by md_document)
    text = html.unescape((run_dir / SCORE_MD).read_text(encoding="utf-8"))
    out.print(text, markup=False, highlight=False, soft_wrap=True)
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


@audit_app.command("compare")
def compare_cmd(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Scored audit runs, e.g. definition-only, then + agent.")
    ],
) -> None:
    """Scored runs side by side in the shape of BenchGuard's Table 2: per model Recall_A,
    Recall_A+P, precision (aligned and partial), Find. and cost of each run."""
    from metaeval.errors import ConfigError
    from metaeval.protocols.audit.score_compare import compare_table, scored_run
    from metaeval.report.markdown import markdown_table

    if len(run_dirs) < 2:
        raise ConfigError("give two scored runs or more", field="run_dirs")
    columns, rows = compare_table([(d.name, scored_run(d)) for d in run_dirs])
    out.print(markdown_table(columns, rows), markup=False, highlight=False, soft_wrap=True)


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
