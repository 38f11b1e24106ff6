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
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from metaeval.engine.cells import Cell, CellResult, Stages, plan_cells, run_cells
from metaeval.engine.executor import JobResources
from metaeval.errors import ConfigError
from metaeval.models.pricing import price_table
from metaeval.protocols.buildfind.agents import make_agent
from metaeval.protocols.buildfind.cells.build import build_cell
from metaeval.protocols.buildfind.cells.context import CellContext
from metaeval.protocols.buildfind.cells.find import find_cell
from metaeval.protocols.buildfind.config import RunConfig
from metaeval.protocols.buildfind.pack import Pack, PackTask, load_pack
from metaeval.protocols.buildfind.plan import pair_wanted
from metaeval.protocols.buildfind.prompts import template_hashes
from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    FIND_KEY,
    FINDS,
    VIEW_FIND_KEY,
    VIEW_FINDS,
    failed_cell,
    logical_view,
)
from metaeval.records import RunDir, environment_hash

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
        self.pack: Pack = load_pack(config.pack)
        unknown = [t for t in config.tasks if t not in self.pack.tasks]
        if unknown:
            raise ConfigError(f"unknown task(s): {', '.join(unknown)}", field="tasks")
        self.tasks: list[PackTask] = [
            self.pack.tasks[t] for t in (config.tasks or sorted(self.pack.tasks))
        ]
        # Resolve every agent now, so a bad name fails before any directory exists.
        self.builders = {b.name: (b, make_agent(b, role="builder")) for b in config.builders}
        self.finders = {f.name: (f, make_agent(f, role="finder")) for f in config.finders}
        self.env_hash = environment_hash()
        self.cells = CellContext(config, self.pack, self.builders, self.finders, self.env_hash)

    # ------------------------------------------------------------------ manifest

    def hashes(self) -> dict[str, str]:
        """Templates, prices, and the spec and questions of every task of the pack (not only
        the selected ones: `tasks` narrows a run without changing it)."""
        hashes = dict(template_hashes())
        for task in self.pack.tasks.values():
            hashes[f"spec:{task.task_id}"] = task.spec_text
            hashes[f"question_bank:{task.task_id}"] = task.questions_text
        hashes["price_table"] = price_table().sha256
        return hashes

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
            hashes=self.hashes(),
            settings=self.meaning_settings(),
            seeds={"seed0": self.config.seed0},
            new_layer=self.new_layer,
        )

    # ------------------------------------------------------------------ phases

    def run(self) -> dict[str, Any]:
        """Build, then find (formal and controls); return counts of what ran and was reused."""
        run = self.open()
        try:
            self.reused: dict[str, int] = {}
            self._check_views(run)
            built = self._build_phase(run)
            found = self._find_phase(run)
            viewed = self._view_phase(run) if self.config.views else 0
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

    def _execute(
        self,
        run: RunDir,
        name: str,
        key_fields: tuple[str, ...],
        planned: list[dict[str, Any]],
        fn: Callable[[RunDir, dict[str, Any], int], dict[str, Any]],
        label: str,
    ) -> int:
        """Run the planned cells without a final record on the engine (`engine.cells`: the one
        ok / final / transient rule); a cell that ends without its own record gets a
        `failed_cell` record. Returns how many cells ran."""
        keys = [tuple(cell[f] for f in key_fields) for cell in planned]
        limit = self.config.max_recovery_attempts
        plan = plan_cells(run, name, key_fields, keys, recovery_limit=limit)
        self.reused[name] = len(planned) - len(plan.todo)
        cells = [
            Cell(
                key=key,
                fn=partial(fn, run, dict(zip(key_fields, key, strict=True)), recovery),
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
            description=label,
        )
        return len(cells)

    def _build_phase(self, run: RunDir) -> int:
        planned = [
            {"task": t.task_id, "builder": b, "build_trial": r}
            for t in self.tasks
            for b in self.builders
            for r in range(self.config.r_build)
        ]
        return self._execute(
            run, BUILDS, BUILD_KEY, planned, partial(build_cell, self.cells), "builds"
        )

    def _find_phase(self, run: RunDir) -> int:
        builds = logical_view(run.read(BUILDS), BUILD_KEY)
        planned = []
        for (task_id, builder, build_trial), record in sorted(builds.items()):
            if record.get("status") != "ok" or task_id not in {t.task_id for t in self.tasks}:
                continue
            for finder in self.finders:
                if not self._pair_wanted(builder, finder):
                    continue
                for r in range(self.config.r_find):
                    planned.append(
                        {
                            "slice": "formal",
                            "task": task_id,
                            "builder": builder,
                            "build_trial": build_trial,
                            "finder": finder,
                            "find_trial": r,
                        }
                    )
        for control in self.config.controls:
            for task in self.tasks:
                for finder in self.finders:
                    for r in range(self.config.r_find):
                        planned.append(
                            {
                                "slice": control,
                                "task": task.task_id,
                                "builder": "",
                                "build_trial": -1,
                                "finder": finder,
                                "find_trial": r,
                            }
                        )
        self.cells.builds_view = builds
        return self._execute(run, FINDS, FIND_KEY, planned, partial(find_cell, self.cells), "finds")

    def _pair_wanted(self, builder: str, finder: str) -> bool:
        """Whether the formal pair is run: always, or with `find_pairs: matched` only when the
        builder's and finder's efforts are equal (a builder no longer configured: kept)."""
        if builder not in self.builders:
            return True
        return pair_wanted(self.config, self.builders[builder][0], self.finders[finder][0])

    def _check_views(self, run: RunDir) -> None:
        """A view name already run with other globs is refused (its records would be reused)."""
        recorded: dict[str | None, tuple[Any, Any]] = {}  # view -> (include, exclude) as recorded
        for rec in run.read(VIEW_FINDS):
            info = rec.get("view_info")
            if isinstance(info, dict):
                recorded.setdefault(rec.get("view"), (info.get("include"), info.get("exclude")))
        for index, view in enumerate(self.config.views):
            if view.name in recorded and recorded[view.name] != (view.include, view.exclude):
                raise ConfigError(
                    f"view {view.name!r} was already run with other globs in {run.path}; "
                    "give the changed view a new name",
                    field=f"views.{index}",
                )

    def _view_phase(self, run: RunDir) -> int:
        """Formal find runs again under each restricted view, recorded apart (VIEW_FINDS)."""
        builds = logical_view(run.read(BUILDS), BUILD_KEY)
        tasks = {t.task_id for t in self.tasks}
        planned = [
            {
                "view": view.name,
                "slice": "formal",
                "task": task_id,
                "builder": builder,
                "build_trial": build_trial,
                "finder": finder,
                "find_trial": r,
            }
            for view in self.config.views
            for (task_id, builder, build_trial), record in sorted(builds.items())
            if record.get("status") == "ok" and task_id in tasks
            for finder in self.finders
            if self._pair_wanted(builder, finder)
            for r in range(self.config.r_find)
        ]
        self.cells.builds_view = builds
        return self._execute(
            run, VIEW_FINDS, VIEW_FIND_KEY, planned, partial(find_cell, self.cells), "view finds"
        )


def open_existing(run_dir: Path) -> RunDir:
    """Open an existing build-and-find run directory with its recorded inputs (label/analyze)."""
    return RunDir.open_existing(run_dir, "buildfind")
