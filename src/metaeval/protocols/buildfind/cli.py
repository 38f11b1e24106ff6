"""`metaeval buildfind ...`: validate, run, label, analyze."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from metaeval.cli_options import MaxConnections, ModelArgs, ModelBaseUrl, ModelTimeout
from metaeval.console import make_console
from metaeval.exit_codes import CellFailure, report_failures
from metaeval.protocols.buildfind.pack.scaffold import init_cmd

buildfind_app = typer.Typer(
    help="Build-and-find: can agents recover a repository's intended design?", no_args_is_help=True
)
out = make_console(markup=False)  # printed text holds user paths and names, never markup
err = make_console(stderr=True)
buildfind_app.command("init")(init_cmd)


def run_counts_text(counts: dict) -> str:
    """'2 builds and 5 finds run (the rest reused)'; the reuse note only when cells existed."""
    text = f"{counts['builds_ran']} build(s) and {counts['finds_ran']} find(s) run"
    reused = counts.get("builds_reused", 0) + counts.get("finds_reused", 0)
    return text + (f" ({reused} reused)" if reused else "")


def print_findings(summary: dict) -> None:
    """The headline figures (named as in the report) and the self-labelling warning."""
    from metaeval.protocols.buildfind.finalize import self_label_warning
    from metaeval.protocols.buildfind.report.headline import headline_text

    out.print(headline_text(summary), highlight=False)
    warning = self_label_warning(summary.get("self_labelled_finders") or [])
    if warning:
        err.print(f"warning: {warning}", style="yellow", highlight=False)


@buildfind_app.command("validate")
def validate_cmd(pack: Annotated[Path, typer.Argument(help="A task pack directory.")]) -> None:
    """Check a task pack; every problem is reported with its file and field."""
    from metaeval.protocols.buildfind.pack.load import format_problems, validate_pack

    problems = validate_pack(pack)
    if problems:
        out.print(format_problems(problems), markup=False, highlight=False)
        raise typer.Exit(1)
    from metaeval.protocols.buildfind.pack.load import load_pack

    tasks = load_pack(pack).tasks.values()
    items = sum(len(t.spec.items) for t in tasks)
    questions = sum(len(t.questions) for t in tasks)
    out.print(f"{pack}: ok ({len(tasks)} task(s), {items} spec item(s), {questions} question(s))")


@buildfind_app.command("plan")
def plan_cmd(
    config: Annotated[Path, typer.Argument(help="Build-and-find run config (YAML).")],
    prices: Annotated[
        Path | None,
        typer.Option(help="Price table (JSON, the bundled prices.json's format) for the estimate."),
    ] = None,
) -> None:
    """Validate a run config and its pack offline and print the planned cells, pairs, effort
    panels and an estimate of tokens and cost (a dry run: no model is called, no agent
    started, nothing written)."""
    from metaeval.errors import ConfigError
    from metaeval.models.pricing import load_price_table, price_table
    from metaeval.protocols.buildfind.agents import make_agent
    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.pack.load import load_pack
    from metaeval.protocols.buildfind.plan import plan_lines, plan_run
    from metaeval.protocols.buildfind.plan_cost import estimate_cost, estimate_lines

    cfg = load_config(config)
    pack = load_pack(cfg.pack)
    unknown = [t for t in cfg.tasks if t not in pack.tasks]
    if unknown:
        raise ConfigError(f"unknown task(s): {', '.join(unknown)}", file=str(config), field="tasks")
    for role, specs in (("builder", cfg.builders), ("finder", cfg.finders)):
        for spec in specs:  # resolves the agent id and its settings; starts nothing
            try:
                make_agent(spec, role=role)
            except ConfigError as exc:
                raise ConfigError(str(exc), file=str(config)) from exc
    table = price_table() if prices is None else load_price_table(prices)
    planned = plan_run(cfg, pack)
    estimate = estimate_cost(cfg, len(planned.tasks), planned.pairs, table)
    for line in [*plan_lines(planned, cfg), *estimate_lines(estimate, table)]:
        out.print(line, markup=False, highlight=False)


@buildfind_app.command("run")
def run_cmd(
    config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Run directory.")] = None,
    new_layer: Annotated[str | None, typer.Option(help="Start a new evidence layer.")] = None,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
) -> None:
    """Build, find (with controls), label, analyze and report; re-running resumes.

    Model options (-M, --model-base-url, ...) apply to every model of the config."""
    from metaeval.cli_options import apply_model_options
    from metaeval.errors import ConfigError
    from metaeval.models.registry import prefetch_sdks
    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.finalize import run_and_finalize

    cfg = load_config(config)
    prefetch_sdks(a.model for a in [*cfg.builders, *cfg.finders] if a.model)
    apply_model_options(model_arg, model_base_url, model_timeout, max_connections)
    run_dir = output or Path("runs") / f"buildfind-{config.stem}"
    try:
        counts, summary = run_and_finalize(cfg, run_dir, new_layer)
    except ConfigError as exc:
        if exc.file is not None:
            raise
        # an unknown agent or task id: say which config it came from
        raise ConfigError(str(exc), file=str(config)) from exc
    out.print(f"{run_counts_text(counts)}; rows: {summary['rows']}")
    print_findings(summary)
    failed = summary["failed_cells"]
    if failed["builds"] or failed["finds"]:
        kinds = ", ".join(f"{kind} {n}" for kind, n in failed["by_kind"].items())
        out.print(
            f"failed cells: {failed['builds']} build(s), {failed['finds']} find(s) ({kinds}); "
            f"reasons in {run_dir / 'summary.json'} and the report's failed_cells table",
            highlight=False,
        )
    else:
        out.print("failed cells: none")
    if counts.get("view_finds_ran"):
        out.print(f"restricted-view finds run: {counts['view_finds_ran']}")
    out.print(
        f"report: {run_dir / 'report.md'} and {run_dir / 'report.html'}; tables: {run_dir / 'tables'}"
    )
    print_pending_labels(run_dir, summary)
    failures = cell_failures(summary.get("failed_cell_reasons") or [], cfg.max_recovery_attempts)
    raise typer.Exit(report_failures(out, failures))


def print_pending_labels(run_dir: Path, summary: dict) -> None:
    """Say when labels/review.csv holds rows only a person can label, and with what."""
    from metaeval.protocols.buildfind.finalize import LABELS_DIR, REVIEW_CSV
    from metaeval.protocols.buildfind.labels import FILLABLE_LABELS

    pending = summary.get("unlabeled_review_rows")
    if pending:
        out.print(
            f"labels: {pending} row(s) of {run_dir / LABELS_DIR / REVIEW_CSV} wait for a person: "
            f"fill their label column with {', '.join(FILLABLE_LABELS)} "
            f"(docs/formats/buildfind.md), then run: metaeval buildfind label {run_dir}",
            highlight=False,
            soft_wrap=True,
        )


FAILURE_KINDS = {
    "infra_error": "infra errors",
    "timeout": "timeouts",
    "error": "failed cells",
    "unparsable": "unparsable answers",
}


def cell_failures(rows: list[dict], max_recovery_attempts: int) -> list[CellFailure]:
    """The summary's failed cells for the console, grouped by who ran them and why: an
    infrastructure error is retried on a rerun while its recovery budget lasts (one attempt
    plus `max_recovery_attempts`); a timeout or an error is final."""
    return [
        CellFailure(
            FAILURE_KINDS.get(row["kind"], "failed cells"),
            f"{row['phase']} by {row['finder'] or row['builder']}: {row['reason']}",
            retried=row["kind"] == "infra_error" and row["attempts"] <= max_recovery_attempts,
        )
        for row in rows
    ]


@buildfind_app.command("label")
def label_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A build-and-find run directory.")],
) -> None:
    """Merge consensus prelabels and the filled review CSV into the rows; re-analyze."""
    from metaeval.protocols.buildfind.finalize import LABELS_DIR, REVIEW_CSV, finalize_run
    from metaeval.protocols.buildfind.run import open_existing

    run = open_existing(run_dir)
    try:
        summary = finalize_run(run)
    finally:
        run.close()
    review = run_dir / LABELS_DIR / REVIEW_CSV
    pending = summary.get("unlabeled_review_rows")
    if pending is None:
        state = "no review file"
    elif pending == 0:
        state = "every review row is labelled"
    else:
        state = f"{pending} review row(s) still unlabeled: fill their label column"
    out.print(f"labels merged from {review} ({state}); rows: {summary['rows']}")
    print_findings(summary)


@buildfind_app.command("analyze")
def analyze_cmd(
    run_dir: Annotated[Path | None, typer.Argument(help="A build-and-find run directory.")] = None,
    rows: Annotated[
        Path | None, typer.Option(help="A question-rows table (.parquet or .csv).")
    ] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Output directory.")] = None,
    view_rows: Annotated[
        Path | None, typer.Option(help="Restricted-view rows (.parquet or .csv) to analyze too.")
    ] = None,
    panels: Annotated[
        str | None,
        typer.Option(
            help="Effort panels: matched (high builders with high finders, low with low; the "
            "paper's) or cross (every builder x finder effort pair). Default: the run config's "
            "`panels`, else matched."
        ),
    ] = None,
    seed0: Annotated[
        int | None,
        typer.Option(
            help="seed0 of the bootstrap intervals (bootstrap_ci). Default: the run config's "
            "seed0, else the config default."
        ),
    ] = None,
) -> None:
    """Recompute every table and the report from a run directory or from a rows file."""
    from metaeval.errors import ConfigError
    from metaeval.protocols.buildfind.analysis.panels import PANEL_MODES
    from metaeval.protocols.buildfind.finalize import analyze_rows_file

    if (run_dir is None) == (rows is None):
        raise ConfigError("give either a run directory or --rows FILE", field="rows")
    if rows is not None:
        source, default_out = rows, rows.parent / "analysis"
    else:
        assert run_dir is not None  # exactly one of the two is given (checked above)
        source, default_out = run_dir / "question_rows.parquet", run_dir / "analysis"
    if view_rows is None and run_dir is not None and (run_dir / "view_rows.parquet").is_file():
        view_rows = run_dir / "view_rows.parquet"
    out_dir = output or default_out
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} exists and is not a directory", field="output")
    config: dict = {}
    if run_dir is not None and (run_dir / "manifest.json").is_file():
        from metaeval.records import read_manifest

        config = read_manifest(run_dir).get("config", {})
    if panels is None:
        panels = config.get("panels", "matched")
    seed0 = config.get("seed0") if seed0 is None else seed0
    if panels not in PANEL_MODES:
        raise ConfigError(
            f"unknown panels {panels!r} (known: {', '.join(PANEL_MODES)})", field="panels"
        )
    paths = analyze_rows_file(source, out_dir, view_rows, panels, seed0)
    out.print(f"written {len(paths)} files into {out_dir}")


@buildfind_app.command("release")
def release_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A finished build-and-find run directory.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Release directory to create.")],
    archive: Annotated[
        bool, typer.Option("--archive/--no-archive", help="Also write OUT.tar.gz.")
    ] = True,
) -> None:
    """Package a run: pack, artifacts, records, rows, tables, reports, labels, claim-evidence
    map, licences, checksums and Croissant metadata; secrets and host paths scrubbed."""
    from metaeval.protocols.buildfind.release.write import build_release

    made = build_release(run_dir, output, archive=archive)
    out.print(f"release: {made.path} ({made.files} files)")
    if made.archive is not None:
        out.print(f"archive: {made.archive}")
    if made.scrubbed:
        out.print(f"scrubbed secrets or host paths in {len(made.scrubbed)} file(s)")


@buildfind_app.command("verify-release")
def verify_release_cmd(
    release: Annotated[Path, typer.Argument(help="A release directory.")],
) -> None:
    """Recompute every table from the released rows and check checksums, claims and the
    Croissant metadata; exit 0 only when everything holds."""
    from metaeval.protocols.buildfind.release.verify import verify_release

    problems = verify_release(release)
    if problems:
        for problem in problems:
            out.print(problem, markup=False, highlight=False, soft_wrap=True)
        out.print(f"{len(problems)} problem(s): the release does not reproduce itself")
        raise typer.Exit(1)
    out.print(f"{release}: every table, claim, checksum and the Croissant metadata hold")
