"""A find cell: one finder answers the question bank on a read-only clone of an artifact (or
on nothing, for the controls); its answers are de-shuffled and graded."""

from __future__ import annotations

import shutil
import uuid
from typing import Any

from metaeval.agents.types import AgentResult, Limits, Task
from metaeval.protocols.buildfind.cells.answer_json import extract_answer_object
from metaeval.protocols.buildfind.cells.context import CellContext, agent_fields, given_limit
from metaeval.protocols.buildfind.config import AgentSpec
from metaeval.protocols.buildfind.pack.schema import PackTask
from metaeval.protocols.buildfind.prompts import answers_schema, render_finder_prompt
from metaeval.protocols.buildfind.records import BuildRecord, FindRecord
from metaeval.protocols.buildfind.seeds import (
    LETTERS,
    deshuffle,
    find_seed,
    permutation,
    run_seed_rule,
    shuffle_options,
)
from metaeval.protocols.buildfind.views.specs import restricted_clone
from metaeval.records import RunDir
from metaeval.sandbox.workspace import Workspace

UNPARSABLE_REMINDER = (
    "\n\nREMINDER: your previous answer could not be read. Write find_answers.json as one "
    "JSON object mapping every question id to its answer letter, and nothing else."
)


def find_cell(ctx: CellContext, run: RunDir, key: dict[str, Any], recovery: int) -> dict[str, Any]:
    pack_task = ctx.pack.tasks[key["task"]]
    spec, agent = ctx.finders[key["finder"]]
    # A view run gets the seed (and option order) of its full-view cell: only the view
    # differs. The recovery index is not part of the seed: a cell re-run after an
    # infrastructure failure shows the finder the same option order.
    seed = find_seed(ctx.config.seed0, key, run_seed_rule(run.manifest.get("seeds")))
    orders = {q.id: permutation(seed, q.id) for q in pack_task.questions}
    shuffled = {q.id: shuffle_options(q.options, orders[q.id]) for q in pack_task.questions}
    prompt = render_finder_prompt(key["slice"], pack_task, shuffled)
    attempt = uuid.uuid4().hex[:10]
    build: BuildRecord | None = None
    if key["slice"] == "formal":
        build = ctx.builds_view[(key["task"], key["builder"], key["build_trial"])]
    builder_agent = ctx.builders[key["builder"]][0].agent if build else None
    metadata = {"seed": seed, "shuffled": shuffled, "reference_builder": builder_agent}
    task = _finder_task(key, pack_task, prompt, metadata)
    result, view_info = _run_finder(ctx, run, key, build, agent, spec, task, attempt)
    answers, problem = parse_answers(result.submission, orders, pack_task)
    first: dict[str, Any] | None = None
    if (
        answers_status(problem) == "unparsable"
        and ctx.config.retry_unparsable
        and result.status != "timeout"
    ):  # a timed-out run is final: no second time limit
        first = {
            "answers_problem": problem,
            "find_answers_blob": run.blobs.put(result.submission or ""),
            **{k: v for k, v in agent_fields(result, run).items() if k != "usage"},
        }
        retry = task.model_copy(update={"instruction": prompt + UNPARSABLE_REMINDER})
        result, view_info = _run_finder(ctx, run, key, build, agent, spec, retry, attempt)
        answers, problem = parse_answers(result.submission, orders, pack_task)
    record: dict[str, Any] = {
        **key,
        "recovery": recovery,
        "attempt": attempt,
        **ctx.common(spec, agent, seed, prompt, pack_task),
        **agent_fields(result, run),
        "permutation": orders,
        "find_answers_blob": run.blobs.put(result.submission or ""),
        "answers_problem": problem,
        "answers_status": answers_status(problem),
        "answers": answers,
        "compile_pass": build.compile_pass if build else None,
        "build_attempt": build.attempt if build else None,
        "n_correct": sum(1 for a in answers.values() if a["correct"]),
        "n_unanswered": sum(1 for a in answers.values() if a["answer"] is None),
    }
    if view_info is not None:
        record["view_info"] = view_info
    if first is not None:
        record["unparsable_first_attempt"] = first
    return FindRecord.model_validate(record).as_record()


def _finder_task(
    key: dict[str, Any], pack_task: PackTask, prompt: str, metadata: dict[str, Any]
) -> Task:
    """The finder's task: the prompt, the answer schema and what a reference finder reads."""
    return Task(
        id=key["task"],
        instruction=prompt,
        metadata={
            "answer_schema": answers_schema(pack_task, LETTERS),
            "seed": metadata["seed"],
            "slice": key["slice"],
            "task_id": key["task"],
            "pack_task_root": str(pack_task.root),
            "shuffled": metadata["shuffled"],
            "reference_builder": metadata["reference_builder"],
        },
    )


def _run_finder(
    ctx: CellContext,
    run: RunDir,
    key: dict[str, Any],
    build: BuildRecord | None,
    agent: Any,
    spec: AgentSpec,
    task: Task,
    attempt: str,
) -> tuple[AgentResult, dict[str, Any] | None]:
    """One finder run on a fresh read-only clone (restricted when the cell has a view)."""
    pack_task = ctx.pack.tasks[key["task"]]
    view = next((v for v in ctx.config.views if v.name == key.get("view")), None)
    view_info = None
    scratch = run.path / "work" / f"find-{attempt}"
    if build is not None:
        if view is None:
            workspace = Workspace.read_only_clone(run.path / build.artifact, scratch)
        else:
            workspace, view_info = restricted_clone(run.path / build.artifact, scratch, view)
    else:
        empty = run.path / "work" / f"empty-{attempt}"
        empty.mkdir(parents=True)
        workspace = Workspace.read_only_clone(empty, scratch)
        shutil.rmtree(empty)
    limits = Limits(
        max_steps=spec.max_steps or ctx.config.budgets.find_max_steps,
        time_limit_s=ctx.config.budgets.find_time_s or pack_task.config.find_time_s,
        max_tokens_per_step=ctx.config.budgets.find_max_tokens_per_step,
    )
    try:
        return given_limit(agent.run(task, workspace, limits), limits), view_info
    finally:
        workspace.remove()


def answers_status(problem: str | None) -> str:
    """ok | extracted (found inside a fence or prose) | missing | unparsable."""
    if problem is None:
        return "ok"
    if problem.startswith("extracted"):
        return "extracted"
    return "unparsable" if problem.startswith("unparsable") else "missing"


def parse_answers(
    submission: str | None, orders: dict[str, list[str]], pack_task: PackTask
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """De-shuffle and grade find_answers.json.

    The answer object is found by content (`answer_json`: bare, fenced or embedded in prose);
    `problem` says what was wrong: nothing submitted, `unparsable: ...` (no JSON object in the
    text), or how a wrapped object was found (`extracted from a fenced block` / `... from the
    surrounding text`, a note, not an error). With no object every question is unanswered.
    """
    data: dict[str, Any] | None = None
    problem = None
    if not submission or not submission.strip():
        problem = "no find_answers.json submitted"
    else:
        data, how = extract_answer_object(submission, (q.id for q in pack_task.questions))
        if data is None:
            problem = "unparsable: find_answers.json holds no JSON object"
        elif how == "fenced":
            problem = "extracted from a fenced block"
        elif how == "embedded":
            problem = "extracted from the surrounding text"
    answers = {}
    for question in pack_task.questions:
        entry = data.get(question.id) if isinstance(data, dict) else None
        shown = (
            entry.get("answer")
            if isinstance(entry, dict)
            else entry
            if isinstance(entry, str)
            else None
        )
        canonical = deshuffle(
            shown.strip().upper() if isinstance(shown, str) else None, orders[question.id]
        )
        answers[question.id] = {
            "shown": shown,
            "answer": canonical,
            "gold": question.gold,
            "correct": canonical == question.gold,
            "evidence_files": entry.get("evidence_files", []) if isinstance(entry, dict) else [],
            "evidence_symbols": entry.get("evidence_symbols", [])
            if isinstance(entry, dict)
            else [],
            "rationale": entry.get("rationale", "") if isinstance(entry, dict) else "",
        }
    return answers, problem
