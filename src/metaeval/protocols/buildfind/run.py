"""Build-and-find orchestration (paper Algorithms 2 and 3).

The build queue drains before any find work starts. Each build cell (task, builder, trial) and
find cell (slice, task, builder, build trial, finder, find trial) is one unit of resume: a
final record (status ok, timeout or error from the agent) is reused; an infrastructure failure
is rerun under a recovery seed as a new record, up to `max_recovery_attempts` times; a cell
still failing after that is counted, with its reasons, by `failed_cells`. A cell that raises
is recorded as infrastructure only for a transient cause (`metaeval.transient`); a parse or
validation failure is a final error, recorded once. The logical view keeps the latest final
record per planned cell.
"""

from __future__ import annotations

import json
import shutil
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval import __version__
from metaeval.agents.types import AgentResult, Limits, Task
from metaeval.engine.executor import Job, JobOutcome, JobResources, make_executor
from metaeval.errors import ConfigError
from metaeval.models.pricing import price_table
from metaeval.protocols.buildfind.agents import effort_setting, make_agent
from metaeval.protocols.buildfind.answer_json import extract_answer_object
from metaeval.protocols.buildfind.config import AgentSpec, RunConfig
from metaeval.protocols.buildfind.pack import Pack, PackTask, load_pack
from metaeval.protocols.buildfind.prompts import (
    answers_schema,
    render_builder_prompt,
    render_finder_prompt,
    template_hashes,
)
from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    FIND_KEY,
    FINDS,
    VIEW_FIND_KEY,
    VIEW_FINDS,
    BuildRecord,
    FindRecord,
    failed_cell,
    logical_view,
)
from metaeval.protocols.buildfind.seeds import (
    LETTERS,
    derive_seed,
    deshuffle,
    permutation,
    shuffle_options,
)
from metaeval.protocols.buildfind.validation import compile_probe, leakage_scan, structure
from metaeval.protocols.buildfind.view_specs import restricted_clone
from metaeval.records import RunDir, environment_hash, sha256_text
from metaeval.records.run import is_final
from metaeval.sandbox.workspace import Workspace
from metaeval.transient import describe, is_transient

# run config keys that do not change what a recorded cell means (see `meaning_settings`)
SELECTION_KEYS = frozenset({"pack", "tasks", "concurrency", "views"})
UNPARSABLE_REMINDER = (
    "\n\nREMINDER: your previous answer could not be read. Write find_answers.json as one "
    "JSON object mapping every question id to its answer letter, and nothing else."
)


@dataclass
class Cell:
    """One planned unit of work and the recovery attempt it is on."""

    key: dict[str, Any]
    recovery: int  # 0 for the first attempt; k for the k-th rerun after an infrastructure failure


def _plan(
    run: RunDir, name: str, key_fields: tuple[str, ...], planned: list[dict], limit: int
) -> list[Cell]:
    """Planned cells without a final record, with their recovery index (capped)."""
    history: dict[tuple, list[dict]] = {}
    for record in run.read(name):
        history.setdefault(tuple(record.get(k) for k in key_fields), []).append(record)
    todo = []
    for key in planned:
        records = history.get(tuple(key[k] for k in key_fields), [])
        if records and is_final(records[-1]):
            continue
        failures = sum(1 for r in records if r.get("infra_error"))
        if failures > limit:
            continue  # recovery budget spent: stays an infrastructure failure in the report
        todo.append(Cell(key, failures))
    return todo


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

    def _execute(self, run: RunDir, name: str, cells: list[Cell], fn, label: str) -> int:
        writer = run.records(name)

        def record(outcome: JobOutcome) -> Future[None]:
            # Handed to the run's writer thread; the executor waits until it is durable.
            if outcome.status == "done":
                return writer.submit(outcome.value)
            cell: Cell = outcome.job.fn.cell  # type: ignore[attr-defined]
            error = (outcome.error or outcome.status)[-4000:]
            return writer.submit(failed_cell(cell.key, cell.recovery, True, error))

        jobs = []
        for cell in cells:
            job_fn = _CellFn(fn, run, cell)
            jobs.append(
                Job(
                    key=json.dumps(cell.key, sort_keys=True),
                    fn=job_fn,
                    timeout_s=None,
                    label=" ".join(str(v) for v in cell.key.values() if v not in ("", -1)),
                    resources=JobResources(sandbox=True),  # agents' commands run in bubblewrap
                )
            )
        make_executor(self.config.concurrency, self.progress, label).run(jobs, record)
        return len(jobs)

    def _build_phase(self, run: RunDir) -> int:
        planned = [
            {"task": t.task_id, "builder": b, "build_trial": r}
            for t in self.tasks
            for b in self.builders
            for r in range(self.config.r_build)
        ]
        cells = _plan(run, BUILDS, BUILD_KEY, planned, self.config.max_recovery_attempts)
        self.reused[BUILDS] = len(planned) - len(cells)
        return self._execute(run, BUILDS, cells, self._build_cell, "builds")

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
        cells = _plan(run, FINDS, FIND_KEY, planned, self.config.max_recovery_attempts)
        self.reused[FINDS] = len(planned) - len(cells)
        self._builds_view = builds
        return self._execute(run, FINDS, cells, self._find_cell, "finds")

    def _pair_wanted(self, builder: str, finder: str) -> bool:
        """Whether the formal pair is run: always, or with `find_pairs: matched` only when the
        builder's and finder's efforts are equal (a builder no longer configured: kept)."""
        if self.config.find_pairs != "matched" or builder not in self.builders:
            return True
        return self.builders[builder][0].effort == self.finders[finder][0].effort

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
        cells = _plan(run, VIEW_FINDS, VIEW_FIND_KEY, planned, self.config.max_recovery_attempts)
        self._builds_view = builds
        return self._execute(run, VIEW_FINDS, cells, self._find_cell, "view finds")

    # ------------------------------------------------------------------ cells

    def _common(
        self, spec: AgentSpec, agent: Any, seed: int, prompt: str, pack_task: PackTask
    ) -> dict[str, Any]:
        return {
            "agent_id": spec.agent,
            "adapter_family": spec.family,
            "model": spec.model,
            "effort": spec.effort,
            "effort_setting": effort_setting(spec, agent),
            "seed": seed,
            "prompt_hash": sha256_text(prompt),
            "spec_hash": sha256_text(pack_task.spec_text),
            "metaeval_version": __version__,
            "environment_hash": self.env_hash,
        }

    def _build_cell(self, run: RunDir, cell: Cell) -> dict[str, Any]:
        key = cell.key
        pack_task = self.pack.tasks[key["task"]]
        spec, agent = self.builders[key["builder"]]
        seed = derive_seed(self.config.seed0, "build", *key.values(), cell.recovery)
        attempt = uuid.uuid4().hex[:10]
        artifact = (
            run.path
            / "artifacts"
            / key["task"]
            / key["builder"]
            / f"r{key['build_trial']}-{attempt}"
        )
        starter = pack_task.root / pack_task.config.starter if pack_task.config.starter else None
        workspace = Workspace.create(artifact, seed_from=starter)
        prompt = render_builder_prompt(pack_task)
        budget = self.config.budgets.build_time_s or pack_task.config.build_time_s
        task = Task(
            id=key["task"],
            instruction=prompt,
            allow_write=True,
            metadata={"task_id": key["task"], "pack_task_root": str(pack_task.root), "seed": seed},
        )
        result = agent.run(
            task,
            workspace,
            Limits(
                max_steps=spec.max_steps or self.config.budgets.build_max_steps,
                time_limit_s=budget,
            ),
        )
        validation = {
            **compile_probe(workspace, pack_task.config.compile_probe),
            **structure(artifact),
        }
        return BuildRecord(
            **key,
            recovery=cell.recovery,
            attempt=attempt,
            **self._common(spec, agent, seed, prompt, pack_task),
            **_agent_fields(result, run),
            artifact=str(artifact.relative_to(run.path.resolve())),
            validation=validation,
            compile_pass=validation["compile_pass"],
            leakage=leakage_scan(artifact, pack_task),
        ).as_record()

    def _find_cell(self, run: RunDir, cell: Cell) -> dict[str, Any]:
        key = cell.key
        pack_task = self.pack.tasks[key["task"]]
        spec, agent = self.finders[key["finder"]]
        # A view run gets the seed (and option order) of its full-view cell: only the view
        # differs. The recovery index is not part of the seed: a cell re-run after an
        # infrastructure failure shows the finder the same option order.
        full_key = [v for k, v in key.items() if k != "view"]
        seed = derive_seed(self.config.seed0, "find", *full_key, 0)
        orders = {q.id: permutation(seed, q.id) for q in pack_task.questions}
        shuffled = {q.id: shuffle_options(q.options, orders[q.id]) for q in pack_task.questions}
        prompt = render_finder_prompt(key["slice"], pack_task, shuffled)
        attempt = uuid.uuid4().hex[:10]
        build = None
        if key["slice"] == "formal":
            build = self._builds_view[(key["task"], key["builder"], key["build_trial"])]
        builder_agent = self.builders[key["builder"]][0].agent if build else None
        task = Task(
            id=key["task"],
            instruction=prompt,
            metadata={
                "answer_schema": answers_schema(pack_task, LETTERS),
                "seed": seed,
                "slice": key["slice"],
                "task_id": key["task"],
                "pack_task_root": str(pack_task.root),
                "shuffled": shuffled,
                "reference_builder": builder_agent,
            },
        )
        result, view_info = self._run_finder(run, key, build, agent, spec, task, attempt)
        answers, problem = parse_answers(result.submission, orders, pack_task)
        first: dict[str, Any] | None = None
        if answers_status(problem) == "unparsable" and self.config.retry_unparsable:
            first = {
                "answers_problem": problem,
                "find_answers_blob": run.blobs.put(result.submission or ""),
                **{k: v for k, v in _agent_fields(result, run).items() if k != "usage"},
            }
            retry = task.model_copy(update={"instruction": prompt + UNPARSABLE_REMINDER})
            result, view_info = self._run_finder(run, key, build, agent, spec, retry, attempt)
            answers, problem = parse_answers(result.submission, orders, pack_task)
        record: dict[str, Any] = {
            **key,
            "recovery": cell.recovery,
            "attempt": attempt,
            **self._common(spec, agent, seed, prompt, pack_task),
            **_agent_fields(result, run),
            "permutation": orders,
            "find_answers_blob": run.blobs.put(result.submission or ""),
            "answers_problem": problem,
            "answers_status": answers_status(problem),
            "answers": answers,
            "compile_pass": build.get("compile_pass") if build else None,
            "build_attempt": build.get("attempt") if build else None,
            "n_correct": sum(1 for a in answers.values() if a["correct"]),
            "n_unanswered": sum(1 for a in answers.values() if a["answer"] is None),
        }
        if view_info is not None:
            record["view_info"] = view_info
        if first is not None:
            record["unparsable_first_attempt"] = first
        return FindRecord.model_validate(record).as_record()

    def _run_finder(
        self,
        run: RunDir,
        key: dict[str, Any],
        build: dict[str, Any] | None,
        agent: Any,
        spec: AgentSpec,
        task: Task,
        attempt: str,
    ) -> tuple[AgentResult, dict[str, Any] | None]:
        """One finder run on a fresh read-only clone (restricted when the cell has a view)."""
        pack_task = self.pack.tasks[key["task"]]
        view = next((v for v in self.config.views if v.name == key.get("view")), None)
        view_info = None
        scratch = run.path / "work" / f"find-{attempt}"
        if build is not None:
            if view is None:
                workspace = Workspace.read_only_clone(run.path / build["artifact"], scratch)
            else:
                workspace, view_info = restricted_clone(run.path / build["artifact"], scratch, view)
        else:
            empty = run.path / "work" / f"empty-{attempt}"
            empty.mkdir(parents=True)
            workspace = Workspace.read_only_clone(empty, scratch)
            shutil.rmtree(empty)
        limits = Limits(
            max_steps=spec.max_steps or self.config.budgets.find_max_steps,
            time_limit_s=self.config.budgets.find_time_s or pack_task.config.find_time_s,
            max_tokens_per_step=self.config.budgets.find_max_tokens_per_step,
        )
        try:
            return agent.run(task, workspace, limits), view_info
        finally:
            workspace.remove()


class _CellFn:
    """A picklable-looking callable binding a cell to its phase function."""

    def __init__(self, fn, run: RunDir, cell: Cell):
        self.fn, self.run, self.cell = fn, run, cell

    def __call__(self) -> dict[str, Any]:
        try:
            return self.fn(self.run, self.cell)
        except Exception as exc:  # noqa: BLE001 - recorded: transient is infra, the rest final
            return failed_cell(self.cell.key, self.cell.recovery, is_transient(exc), describe(exc))


def _agent_fields(result: AgentResult, run: RunDir) -> dict[str, Any]:
    transcript = "\n".join(e.model_dump_json(exclude_none=True) for e in result.transcript)
    return {
        "status": result.status,
        "stop_reason": result.stop_reason,
        "infra_error": result.infra_error,
        "error": result.error,
        "steps": result.steps,
        "usage": result.usage.model_dump(),
        "cost_usd": result.cost_usd,
        "novel_retrieval_bytes": result.effort.novel_retrieval_bytes,
        "novel_tool_call_bytes": result.effort.novel_tool_call_bytes,
        "wall_clock_seconds": round(result.wall_clock_s, 3),
        "transcript_blob": run.blobs.put(transcript),
    }


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


def open_existing(run_dir: Path) -> RunDir:
    """Open an existing build-and-find run directory with its recorded inputs (label/analyze)."""
    return RunDir.open_existing(run_dir, "buildfind")
