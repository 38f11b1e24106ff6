"""Run a recursive improve experiment from its manifest into a bundle (resumable), and
re-render a bundle's summary files and reports from its ledger."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import ValidationError

from metaeval.config_files import validation_error
from metaeval.errors import ConfigError
from metaeval.protocols.improve.extension import bundle_budget
from metaeval.protocols.improve.loop import TrialLoop
from metaeval.protocols.improve.meta_agents import make_meta_agent
from metaeval.protocols.improve.plan import build_plan
from metaeval.protocols.improve.records import (
    BASELINE_EVAL,
    LEDGER,
    LEDGER_NAME,
    LedgerEntry,
    NodeEval,
)
from metaeval.protocols.improve.suite_images import pull_suite_images
from metaeval.protocols.improve.summary_records import RunSummary
from metaeval.tasks.safe_files import irregular_entries
from metaeval.tasks.safe_json import read_json


def run_experiment(
    manifest_path: Path,
    output: Path | None = None,
    budget: int | None = None,
    meta_agent: Any = None,
    host_env: Sequence[str] = (),
    sandbox: str | None = None,
    models: Mapping[str, str | None] | None = None,
    pull: str = "never",
) -> RunSummary:
    """Run or resume the experiment; returns the benchmark-level summary (Section 3.5)."""
    plan, resolved = build_plan(manifest_path, output, budget, host_env, sandbox, models, pull)
    tasks = [*plan.optimize_tasks, *(plan.held_out_tasks or [])]
    for problem in pull_suite_images(tasks, plan.sandbox, plan.pull):
        sys.stderr.write(f"warning: {problem}\n")
    agent = meta_agent or make_meta_agent(
        resolved.sut.meta_agent.model_dump(), launch_profile=resolved.launch_profile
    )
    return TrialLoop(plan, agent).run()


def rerender(bundle: Path) -> list[Path]:
    """Re-write the bundle's summary files and reports from its ledger.

    ConfigError (naming the file and field) for a directory that is not a bundle or a bundle
    file that is unreadable or malformed.
    """
    from metaeval.protocols.improve.bundle import BundleFiles, write_summary_files
    from metaeval.records import RunDir

    bundle = Path(bundle)
    if not bundle.is_dir():
        raise ConfigError("bundle directory not found", file=str(bundle))
    _check_bundle_entries(bundle)
    # validate the bundle's own files first: their errors name the file and field
    resolved = _bundle_json(bundle, "resolved_manifest.json")
    try:
        plan = SimpleNamespace(
            bundle=bundle,
            run_id=bundle.name,
            baseline_id=resolved["baseline"]["id"],
            baseline_commit=resolved["baseline"]["base_commit"],
            trial_budget=bundle_budget(bundle) or resolved["trial_budget"],
        )
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"not a resolved manifest (missing {exc})",
            file=str(bundle / "resolved_manifest.json"),
        ) from exc
    baseline_data = _bundle_json(bundle, BASELINE_EVAL)
    try:
        baseline = NodeEval.model_validate(baseline_data)
    except ValidationError as exc:
        raise validation_error(exc, file=bundle / BASELINE_EVAL) from None
    try:
        run = RunDir.open_existing(bundle, "improve")
    except RecursionError:  # a layers.jsonl line nested too deeply for the JSON parser
        raise ConfigError("a record is nested too deeply to read", file=str(bundle)) from None
    try:
        files = BundleFiles(run)
        try:
            ledger = files.run.read(LEDGER_NAME, all_layers=True)
        except RecursionError:
            raise ConfigError(
                "a record is nested too deeply to read", file=str(bundle / LEDGER)
            ) from None
        entries = _check_ledger(ledger, bundle / LEDGER)
        try:
            write_summary_files(plan, baseline, entries, files)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(
                f"a ledger or baseline record lacks a field or has a wrong type "
                f"({type(exc).__name__}: {exc}); the bundle was not written by this version "
                "of metaeval",
                file=str(bundle / LEDGER),
            ) from exc
    finally:
        run.close()
    return [bundle / "report.md", bundle / "report.html"]


def _check_ledger(ledger: list[dict[str, Any]], path: Path) -> list[LedgerEntry]:
    """Every ledger line read through its record model (`records.LedgerEntry`): a line that
    lacks a field or has a wrong type is a ConfigError naming the line and the field."""
    entries = []
    for number, entry in enumerate(ledger, 1):
        try:
            entries.append(LedgerEntry.model_validate(entry))
        except ValidationError as exc:
            error = validation_error(exc, file=path)
            message = str(error).removeprefix(f"{path}: field '{error.field}': ")
            raise ConfigError(
                f"line {number}: {message}", file=str(path), field=error.field
            ) from None
    return entries


def _bundle_json(bundle: Path, name: str) -> dict[str, Any]:
    """A JSON object of the bundle: a regular file (no symlink, FIFO or device), size and
    nesting capped; ConfigError naming the file otherwise."""
    path = bundle / name
    if not os.path.lexists(path):
        raise ConfigError(
            f"not an improve bundle: no {name} (bundles are written by `metaeval improve run`)",
            file=str(bundle),
        )
    return read_json(path, bundle)


def _check_bundle_entries(bundle: Path) -> None:
    """Refuse a bundle whose top level holds what `metaeval improve run` never writes: a
    symlink (its manifest, ledger or lock would be read or written through it) or a FIFO,
    socket or device (reading or locking it would block)."""
    odd = irregular_entries(bundle, recursive=False)
    if odd:
        listed = "; ".join(f"{e.rel}: {e.describe()}" for e in odd[:10])
        raise ConfigError(
            f"not an improve bundle as metaeval writes it, not read: {listed}", file=str(bundle)
        )
