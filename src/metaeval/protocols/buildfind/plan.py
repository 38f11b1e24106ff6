"""What a run config plans, without running anything: the build cells, the formal
builder x finder pairs (all, or only matched efforts with ``find_pairs: matched``), the
control cells and the effort panels they are analysed in. `metaeval buildfind plan` prints it
(a dry run that calls no model and starts no agent).

A run (`run.py`) goes through three `Phase`s planned here: builds, then finds (formal, on the
ok builds of the logical view, and controls), then finds under restricted views; each phase
names the record kind it writes, the fields that key its cells, the cell keys and the cell
function that runs one. `input_hashes` are what the run's manifest records of its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from metaeval.models.pricing import price_table
from metaeval.protocols.buildfind.cells.build import build_cell
from metaeval.protocols.buildfind.cells.context import CellContext
from metaeval.protocols.buildfind.cells.find import find_cell
from metaeval.protocols.buildfind.config import AgentSpec, RunConfig
from metaeval.protocols.buildfind.pack.schema import Pack, PackTask
from metaeval.protocols.buildfind.prompts import template_hashes
from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    FIND_KEY,
    FINDS,
    VIEW_FIND_KEY,
    VIEW_FINDS,
    BuildRecord,
    FailedCell,
)
from metaeval.records import RunDir

CellFunction = Callable[[CellContext, RunDir, dict[str, Any], int], dict[str, Any]]


def pair_wanted(config: RunConfig, builder: AgentSpec, finder: AgentSpec) -> bool:
    """A formal pair is run always, or with `find_pairs: matched` only when the builder's and
    the finder's efforts are equal (the only pairs the paper's matched panels analyse)."""
    return config.find_pairs != "matched" or builder.effort == finder.effort


@dataclass
class RunPlan:
    """Cell counts of a config, assuming every build succeeds (a failed build has no finds)."""

    tasks: list[str]
    builds: int
    pairs: list[tuple[str, str]]
    formal_finds: int
    control_finds: int
    panels: dict[str, list[tuple[str, str]]]


def plan_run(config: RunConfig, pack: Pack) -> RunPlan:
    """The cells `config` plans over the tasks it selects from `pack`."""
    tasks = list(config.tasks or sorted(pack.tasks))
    pairs = [
        (b.name, f.name)
        for b in config.builders
        for f in config.finders
        if pair_wanted(config, b, f)
    ]
    efforts = {a.name: a.effort for a in [*config.builders, *config.finders]}
    panels: dict[str, list[tuple[str, str]]] = {}
    for builder, finder in pairs:
        b, f = efforts[builder], efforts[finder]
        if config.panels == "cross":
            panels.setdefault(f"{b}/{f}", []).append((builder, finder))
        elif b == f or f == "default":
            panels.setdefault(b, []).append((builder, finder))
        else:
            panels.setdefault("pooled tables only (efforts differ)", []).append((builder, finder))
    return RunPlan(
        tasks=tasks,
        builds=len(tasks) * len(config.builders) * config.r_build,
        pairs=pairs,
        formal_finds=len(tasks) * config.r_build * len(pairs) * config.r_find,
        control_finds=len(config.controls) * len(tasks) * len(config.finders) * config.r_find,
        panels=panels,
    )


def plan_lines(plan: RunPlan, config: RunConfig) -> list[str]:
    """The plan as the console prints it."""
    lines = [
        f"tasks: {', '.join(plan.tasks)}",
        f"builds: {plan.builds} ({len(config.builders)} builder(s) x {len(plan.tasks)} task(s) "
        f"x r_build {config.r_build})",
        f"formal pairs: {len(plan.pairs)} of {len(config.builders) * len(config.finders)} "
        f"(find_pairs: {config.find_pairs})",
        f"formal finds: {plan.formal_finds} (pairs x tasks x r_build x r_find {config.r_find}, "
        "every build ok)",
        f"formal finds per artifact: {_per_artifact(plan, config)} (its finders x r_find; an "
        "artifact failing its compile probe is read too, a stress diagnostic outside the "
        "compile-pass panel)",
        f"control finds: {plan.control_finds} ({', '.join(config.controls) or 'no controls'})",
        f"effort panels ({config.panels}):",
    ]
    for panel, pairs in sorted(plan.panels.items()):
        builders = sorted({b for b, _ in pairs})
        finders = sorted({f for _, f in pairs})
        lines.append(
            f"  {panel}: {len(builders)} builder(s) x {len(finders)} finder(s) = {len(pairs)} "
            f"pair(s); builders {', '.join(builders)}; finders {', '.join(finders)}"
        )
    return lines


def _per_artifact(plan: RunPlan, config: RunConfig) -> str:
    """Formal finds on one artifact: "36", or "18 to 36" when builders have unequal pairs."""
    counts = {b.name: 0 for b in config.builders}
    for builder, _ in plan.pairs:
        counts[builder] += config.r_find
    low, high = min(counts.values()), max(counts.values())
    return str(low) if low == high else f"{low} to {high}"


@dataclass
class Phase:
    """One phase of a run: the record kind it writes, the fields that key its cells, the
    planned cell keys (in order) and the cell function that runs one."""

    kind: str
    key_fields: tuple[str, ...]
    keys: list[dict[str, Any]]
    cell: CellFunction
    label: str


def input_hashes(pack: Pack) -> dict[str, str]:
    """Templates, prices, and the spec and questions of every task of the pack (not only
    the selected ones: `tasks` narrows a run without changing it)."""
    hashes = dict(template_hashes())
    for task in pack.tasks.values():
        hashes[f"spec:{task.task_id}"] = task.spec_text
        hashes[f"question_bank:{task.task_id}"] = task.questions_text
    hashes["price_table"] = price_table().sha256
    return hashes


def build_phase(config: RunConfig, tasks: list[PackTask]) -> Phase:
    """Every (task, builder, build trial) of the selected tasks."""
    keys = [
        {"task": t.task_id, "builder": b.name, "build_trial": r}
        for t in tasks
        for b in config.builders
        for r in range(config.r_build)
    ]
    return Phase(BUILDS, BUILD_KEY, keys, build_cell, "builds")


def ok_builds(builds: Mapping[tuple, BuildRecord | FailedCell]) -> dict[tuple, BuildRecord]:
    """The builds of a logical view whose artifact is inspected (status ok), by BUILD_KEY."""
    return {
        key: record
        for key, record in builds.items()
        if isinstance(record, BuildRecord) and record.status == "ok"
    }


def find_phase(
    config: RunConfig, tasks: list[PackTask], builds: Mapping[tuple, BuildRecord]
) -> Phase:
    """Formal finds on each ok build of a selected task by each wanted finder, then the
    controls (no artifact) of each selected task by each finder."""
    selected = {t.task_id for t in tasks}
    keys = [
        {
            "slice": "formal",
            "task": task_id,
            "builder": builder,
            "build_trial": build_trial,
            "finder": finder,
            "find_trial": r,
        }
        for (task_id, builder, build_trial) in sorted(builds)
        if task_id in selected
        for finder in _wanted_finders(config, builder)
        for r in range(config.r_find)
    ]
    keys += [
        {
            "slice": control,
            "task": task.task_id,
            "builder": "",
            "build_trial": -1,
            "finder": finder.name,
            "find_trial": r,
        }
        for control in config.controls
        for task in tasks
        for finder in config.finders
        for r in range(config.r_find)
    ]
    return Phase(FINDS, FIND_KEY, keys, find_cell, "finds")


def view_phase(
    config: RunConfig, tasks: list[PackTask], builds: Mapping[tuple, BuildRecord]
) -> Phase:
    """The formal finds of `find_phase` again under each restricted view of the config."""
    selected = {t.task_id for t in tasks}
    keys = [
        {
            "view": view.name,
            "slice": "formal",
            "task": task_id,
            "builder": builder,
            "build_trial": build_trial,
            "finder": finder,
            "find_trial": r,
        }
        for view in config.views
        for (task_id, builder, build_trial) in sorted(builds)
        if task_id in selected
        for finder in _wanted_finders(config, builder)
        for r in range(config.r_find)
    ]
    return Phase(VIEW_FINDS, VIEW_FIND_KEY, keys, find_cell, "view finds")


def _wanted_finders(config: RunConfig, builder: str) -> list[str]:
    """The finders of `builder`'s formal pairs (`pair_wanted`; a builder no longer in the
    config keeps every finder)."""
    specs = {b.name: b for b in config.builders}
    if builder not in specs:
        return [f.name for f in config.finders]
    return [f.name for f in config.finders if pair_wanted(config, specs[builder], f)]
