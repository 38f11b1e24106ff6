"""A build cell: one builder writes one artifact from the hidden spec; the compile probe (and
the relaxed probe when it fails), the structure scan and the leakage scan are recorded with
it."""

from __future__ import annotations

import uuid
from typing import Any

from metaeval.agents.types import Limits, Task
from metaeval.protocols.buildfind.artifact.relaxed_probe import relaxed_probe
from metaeval.protocols.buildfind.artifact.validation import (
    compile_probe,
    leakage_scan,
    structure,
    wrote_nothing,
)
from metaeval.protocols.buildfind.cells.context import CellContext, agent_fields, given_limit
from metaeval.protocols.buildfind.prompts import render_builder_prompt
from metaeval.protocols.buildfind.records import BuildRecord
from metaeval.protocols.buildfind.seeds import build_seed, run_seed_rule
from metaeval.records import RunDir
from metaeval.sandbox.workspace import Workspace


def build_cell(ctx: CellContext, run: RunDir, key: dict[str, Any], recovery: int) -> dict[str, Any]:
    pack_task = ctx.pack.tasks[key["task"]]
    spec, agent = ctx.builders[key["builder"]]
    seed = build_seed(ctx.config.seed0, key, recovery, run_seed_rule(run.manifest.get("seeds")))
    attempt = uuid.uuid4().hex[:10]
    artifact = (
        run.path / "artifacts" / key["task"] / key["builder"] / f"r{key['build_trial']}-{attempt}"
    )
    starter = pack_task.root / pack_task.config.starter if pack_task.config.starter else None
    workspace = Workspace.create(artifact, seed_from=starter)
    prompt = render_builder_prompt(pack_task)
    budget = ctx.config.budgets.build_time_s or pack_task.config.build_time_s
    task = Task(
        id=key["task"],
        instruction=prompt,
        allow_write=True,
        metadata={"task_id": key["task"], "pack_task_root": str(pack_task.root), "seed": seed},
    )
    limits = Limits(
        max_steps=spec.max_steps or ctx.config.budgets.build_max_steps, time_limit_s=budget
    )
    result = given_limit(agent.run(task, workspace, limits), limits)
    validation = {
        **compile_probe(workspace, pack_task.config.compile_probe),
        **structure(artifact),
    }
    if wrote_nothing(artifact, validation["file_list"], starter):
        # a probe such as `python -m compileall .` passes on an empty tree
        validation["compile_pass"] = False
        validation["wrote_nothing"] = True
    if not validation["compile_pass"]:  # beside the strict outcome, never replacing it
        config = pack_task.config
        validation["relaxed_probe"] = relaxed_probe(
            artifact, config.project_file, config.compile_probe
        )
    return BuildRecord(
        **key,
        recovery=recovery,
        attempt=attempt,
        **ctx.common(spec, agent, seed, prompt, pack_task),
        **agent_fields(result, run),
        artifact=str(artifact.relative_to(run.path.resolve())),
        validation=validation,
        compile_pass=validation["compile_pass"],
        leakage=leakage_scan(artifact, pack_task),
    ).as_record()
