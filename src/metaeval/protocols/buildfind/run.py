"""Build-and-find orchestration (paper Algorithms 2 and 3).

The build queue drains before any find work starts. Each build cell (task, builder, trial) and
find cell (slice, task, builder, build trial, finder, find trial) is one unit of resume: a
final record (status ok, timeout or error from the agent) is reused; an infrastructure failure
is rerun as a new record (a build under a recovery seed; a find keeps its seed, so it sees the
same option order), up to `max_recovery_attempts` times; a cell still failing after that is
counted, with its reasons, by `failed_cells`. The cells run on the shared engine
(`metaeval.engine.cells`), whose one rule sorts a cell that raises: infrastructure for a
transient cause, else a final error recorded once. The logical view keeps the latest final
record per planned cell.

What each phase runs is planned in `plan.py`; the cells themselves are in `cells/`.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from metaeval.engine.cells import Cell, CellResult, Stages, plan_cells, run_cells
from metaeval.engine.executor import JobResources
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.cells.context import CellContext
from metaeval.protocols.buildfind.config import RunConfig
from metaeval.protocols.buildfind.plan import (
    Phase,
    build_phase,
    find_phase,
    input_hashes,
    ok_builds,
    view_phase,
)
from metaeval.protocols.buildfind.records import (
    BUILDS,
    FINDS,
    VIEW_FINDS,
    FindRecord,
    failed_cell,
    final_builds,
    parse_find,
)
from metaeval.protocols.buildfind.seeds import SEED_RULE
from metaeval.records import RunDir

# run config keys that do not change what a recorded cell means (see `meaning_settings`)
SELECTION_KEYS = frozenset({"pack", "tasks", "concurrency", "views"})


class BuildFindRun:
    """One build-and-find run over a task pack."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        new_layer: str | None = None,
        progress: bool | None = None,
    ):
        self.config = config
        self.run_dir = Path(run_dir).resolve()  # records store artifact paths relative to it
        self.new_layer = new_layer
        self.progress = progress
        self.cells = CellContext.for_run(config)

    # ------------------------------------------------------------------ manifest

    def meaning_settings(self) -> dict[str, Any]:
        """The config keys a rerun must keep (`RunDir.open` compares them): the agents behind
        each builder and finder name, trials, seed, budgets, controls, base finders, recovery.
        `tasks` only selects cells, `concurrency` only paces them, the pack's content is
        hashed (its path may move) and `views` are checked per view (`_check_views`)."""
        config = self.config.model_dump(mode="json")
        return {k: v for k, v in config.items() if k not in SELECTION_KEYS}

    def open(self) -> RunDir:
        config = self.config.model_dump(mode="json")
        return RunDir.open(
            self.run_dir,
            protocol="buildfind",
            config=config,
            hashes=input_hashes(self.cells.pack),
            settings=self.meaning_settings(),
            seeds={"seed0": self.config.seed0, "rule": SEED_RULE},
            new_layer=self.new_layer,
        )

    # ------------------------------------------------------------------ phases

    def run(self) -> dict[str, Any]:
        """Build, then find (formal and controls); return counts of what ran and was reused."""
        run = self.open()
        try:
            self.reused: dict[str, int] = {}
            self._check_views(run)
            tasks = self.cells.tasks
            built = self._execute(run, build_phase(self.config, tasks))
            self.cells.builds_view = ok_builds(final_builds(run.read(BUILDS)))
            found = self._execute(run, find_phase(self.config, tasks, self.cells.builds_view))
            viewed = 0
            if self.config.views:
                self.cells.builds_view = ok_builds(final_builds(run.read(BUILDS)))
                phase = view_phase(self.config, tasks, self.cells.builds_view)
                viewed = self._execute(run, phase)
            return {
                "builds_ran": built,
                "finds_ran": found,
                "view_finds_ran": viewed,
                "builds_reused": self.reused.get(BUILDS, 0),
                "finds_reused": self.reused.get(FINDS, 0),
                "run": run.path,
            }
        finally:
            run.close()

    def _execute(self, run: RunDir, phase: Phase) -> int:
        """Run the phase's cells without a final record on the engine (`engine.cells`: the one
        ok / final / transient rule); a cell that ends without its own record gets a
        `failed_cell` record. Returns how many cells ran."""
        name, key_fields = phase.kind, phase.key_fields
        keys = [tuple(cell[f] for f in key_fields) for cell in phase.keys]
        limit = self.config.max_recovery_attempts
        plan = plan_cells(run, name, key_fields, keys, recovery_limit=limit)
        self.reused[name] = len(phase.keys) - len(plan.todo)
        run_cell = partial(phase.cell, self.cells)
        cells = [
            Cell(
                key=key,
                fn=partial(run_cell, run, dict(zip(key_fields, key, strict=True)), recovery),
                label=" ".join(str(v) for v in key if v not in ("", -1)),
                resources=JobResources(sandbox=True),  # agents' commands run in bubblewrap
                recovery=recovery,
            )
            for key, recovery in plan.todo
        ]

        def write(result: CellResult) -> Stages:
            if result.kind == "ok":
                return [[(name, result.value)]]
            key = dict(zip(key_fields, result.cell.key, strict=True))
            transient = result.kind == "transient"
            error = (result.error or "")[-4000:]
            return [[(name, failed_cell(key, result.cell.recovery, transient, error))]]

        run_cells(
            run,
            cells,
            write,
            concurrency=self.config.concurrency,
            progress=self.progress,
            description=phase.label,
        )
        return len(cells)

    def _check_views(self, run: RunDir) -> None:
        """A view name already run with other globs is refused (its records would be reused)."""
        recorded: dict[str | None, tuple[Any, Any]] = {}  # view -> (include, exclude) as recorded
        for record in map(parse_find, run.read(VIEW_FINDS)):
            if isinstance(record, FindRecord) and record.view_info is not None:
                info = record.view_info
                recorded.setdefault(record.view, (info.get("include"), info.get("exclude")))
        for index, view in enumerate(self.config.views):
            if view.name in recorded and recorded[view.name] != (view.include, view.exclude):
                raise ConfigError(
                    f"view {view.name!r} was already run with other globs in {run.path}; "
                    "give the changed view a new name",
                    field=f"views.{index}",
                )


def open_existing(run_dir: Path) -> RunDir:
    """Open an existing build-and-find run directory with its recorded inputs (label/analyze)."""
    return RunDir.open_existing(run_dir, "buildfind")
