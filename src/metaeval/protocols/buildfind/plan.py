"""What a run config plans, without running anything: the build cells, the formal
builder x finder pairs (all, or only matched efforts with ``find_pairs: matched``), the
control cells and the effort panels they are analysed in. `metaeval buildfind plan` prints it
(a dry run that calls no model and starts no agent)."""

from __future__ import annotations

from dataclasses import dataclass

from metaeval.protocols.buildfind.config import AgentSpec, RunConfig
from metaeval.protocols.buildfind.pack import Pack


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
            panels.setdefault("not analysed (efforts differ)", []).append((builder, finder))
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
        f"formal finds: {plan.formal_finds} (pairs x tasks x r_build x r_find {config.r_find})",
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
