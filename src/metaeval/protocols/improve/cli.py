"""`metaeval improve ...`: init, init-target, run, matrix, report, check-patch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from metaeval.cli_options import AllowHostEnv, Pull, host_env_names
from metaeval.console import make_console

improve_app = typer.Typer(
    help="Improve: a meta-agent patches a target agent under a fixed boundary.",
    no_args_is_help=True,
)
out = make_console(markup=False)  # printed text holds user paths and names, never markup


@improve_app.command("init")
def init_cmd(
    dest: Annotated[Path, typer.Argument(help="A new or empty directory for the experiment.")],
) -> None:
    """Scaffold a minimal experiment: one manifest, one suite and a target repository."""
    from metaeval.protocols.improve.scaffold import init_experiment

    edit = init_experiment(dest)
    out.print("written: " + ", ".join(str(p) for p in edit))
    out.print(f"run it: metaeval improve run {dest / 'manifest.json'}")


@improve_app.command("init-target")
def init_target_cmd(
    family: Annotated[str, typer.Argument(help="toolloop | mini-swe-agent")],
    dest: Annotated[Path, typer.Argument(help="Directory for the target's git repository.")],
) -> None:
    """Materialize a target agent as a git repository with a pinned baseline commit."""
    from metaeval.protocols.improve.init_target import init_target

    commit = init_target(family, dest)
    out.print(f"{family} target in {dest} at baseline commit {commit}")


@improve_app.command("run")
def run_cmd(
    manifest: Annotated[Path, typer.Argument(help="Experiment manifest (JSON).")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Bundle directory.")] = None,
    budget: Annotated[int | None, typer.Option(min=1, help="Override the trial budget.")] = None,
    allow_host_env: AllowHostEnv = None,
    model: Annotated[
        str | None,
        typer.Option(
            "-M",
            "--model",
            help="Model of the target agent and of the meta-agent (the target inherits the "
            "meta-agent's model, as in the paper); a scripted meta-agent has none.",
        ),
    ] = None,
    target_model: Annotated[
        str | None, typer.Option(help="Model of the target agent only (wins over -M).")
    ] = None,
    meta_model: Annotated[
        str | None, typer.Option(help="Model of the meta-agent only (wins over -M).")
    ] = None,
    sandbox: Annotated[
        str,
        typer.Option(
            help="Where tasks and their verifiers run: bwrap (every task in bubblewrap), "
            "auto (a task with a Dockerfile or image in its own container when Docker or "
            "Podman works, else bubblewrap), docker or podman (that engine, required)."
        ),
    ] = "bwrap",
    pull: Pull = "never",
) -> None:
    """Run (or resume) the recursive trial loop; writes the bundle."""
    from metaeval.exit_codes import report_failures
    from metaeval.protocols.improve.bundle import summary_text
    from metaeval.protocols.improve.plan import build_plan
    from metaeval.protocols.improve.report import framework_failures
    from metaeval.protocols.improve.run import run_experiment

    host_env = host_env_names(allow_host_env or [])
    models = {"model": model, "target_model": target_model, "meta_model": meta_model}
    # the bundle path, planned first (suites may change)
    plan, _ = build_plan(manifest, output, budget, host_env, sandbox, models, pull)
    summary = run_experiment(
        manifest, output, budget, host_env=host_env, sandbox=sandbox, models=models, pull=pull
    )
    out.print(summary_text(summary), highlight=False)
    out.print(f"bundle: {plan.bundle}; report: {plan.bundle / 'report.html'}")
    failures = framework_failures(plan.bundle, summary.trials_consumed)
    raise typer.Exit(report_failures(out, failures))


@improve_app.command("matrix")
def matrix_cmd(
    config: Annotated[Path, typer.Argument(help="Matrix config (YAML or JSON).")],
    plan_only: Annotated[
        bool,
        typer.Option("--plan", help="Only show what would run: cells, evaluations, calls."),
    ] = False,
    allow_host_env: AllowHostEnv = None,
    sandbox: Annotated[
        str, typer.Option(help="Where tasks run, as for `improve run --sandbox`.")
    ] = "bwrap",
    pull: Pull = "never",
) -> None:
    """Run (or resume) lanes x benchmarks (x seeds) from one config; writes the matrix report."""
    from metaeval.protocols.improve.matrix.report import row_cells
    from metaeval.protocols.improve.matrix.run import plan_matrix, plan_text, run_matrix

    host_env = host_env_names(allow_host_env or [])
    if plan_only:
        out.print(plan_text(plan_matrix(config, sandbox, host_env, pull)), highlight=False)
        return
    rows, written = run_matrix(config, sandbox, host_env, pull)
    for row in rows:
        values = row_cells(row)
        out.print(
            f"{row.cell}: baseline {values[3]}%, best {values[4]}% ({values[5]} pp), {row.status}",
            highlight=False,
        )
    out.print("written: " + ", ".join(str(p) for p in written))
    from metaeval.exit_codes import CELLS_FAILED

    failed = [row.cell for row in rows if row.status.startswith("failed")]
    if failed:  # the other cells ran; rerunning the same command retries these
        out.print(f"failed cells: {', '.join(failed)}")
        raise typer.Exit(CELLS_FAILED)


@improve_app.command("report")
def report_cmd(bundle: Annotated[Path, typer.Argument(help="A bundle directory.")]) -> None:
    """Re-render a bundle's summary files and report from its ledger."""
    from metaeval.protocols.improve.run import rerender

    out.print("written: " + ", ".join(str(p) for p in rerender(bundle)))


@improve_app.command("check-patch")
def check_patch_cmd(
    patch: Annotated[Path, typer.Argument(help="A unified diff.")],
    boundary: Annotated[Path, typer.Option(help="Mutation boundary (JSON).")],
    worktree: Annotated[
        Path | None, typer.Option(help="Worktree to check symlinks against.")
    ] = None,
) -> None:
    """Check a patch against a mutation boundary: exit 0 accepted, 1 rejected (every reason)."""
    from metaeval.protocols.improve.patch_check import check_patch_cli

    raise typer.Exit(check_patch_cli(boundary, patch, worktree=worktree))
