"""The demo: the toolloop agent answers three questions about a bundled repository.

Each question is one cell. Every answer lands in `answers.jsonl` of the run directory; running
again skips answered cells and retries only missing or infrastructure-failed ones.
"""

from __future__ import annotations

import hashlib
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metaeval.agents.toolloop import JSON_MODE_HINT, SYSTEM_PROMPT, ToolLoopAgent
from metaeval.agents.types import Limits, Task
from metaeval.config_files import parse_yaml, read_text, validate
from metaeval.engine.executor import Job, JobOutcome, LocalExecutor
from metaeval.errors import ConfigError
from metaeval.models.pricing import price_table
from metaeval.models.registry import get_model
from metaeval.models.types import Usage
from metaeval.records import RunDir
from metaeval.records.names import SafeName
from metaeval.report.markdown import markdown_table, md_code, md_document
from metaeval.sandbox.workspace import Workspace

RECORDS = "answers"
LETTERS = ("A", "B", "C", "D")
# Three steps (look, read, answer) keep the demo to a few minutes with the local model.
DEMO_LIMITS = Limits(
    max_steps=3, time_limit_s=240.0, max_tool_output_bytes=3000, max_tokens_per_step=200
)


class Question(BaseModel):
    """A multiple-choice question about the bundled repository."""

    id: SafeName  # names the Q&A cell in the run's records
    question: str
    options: dict[str, str]
    gold: str


def bundle_dir() -> Path:
    """Folder holding the demo repository and question bank."""
    return Path(str(resources.files("metaeval.demo")))


def load_questions(path: Path | None = None) -> list[Question]:
    """Parse and check a question bank; errors name the file and the field."""
    path = path or bundle_dir() / "questions.yaml"
    if not path.is_file():
        raise ConfigError("question bank not found", file=str(path))
    data = parse_yaml(read_text(path), str(path))
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigError("expected a list", file=str(path), field="questions")
    questions: list[Question] = []
    for index, item in enumerate(items):
        question = validate(Question, item, file=path, prefix=f"questions.{index}")
        if sorted(question.options) != list(LETTERS):
            raise ConfigError(
                "needs options A-D", file=str(path), field=f"questions.{index}.options"
            )
        if any(q.id == question.id for q in questions):
            raise ConfigError(
                f"duplicate question id '{question.id}'",
                file=str(path),
                field=f"questions.{index}.id",
            )
        if question.gold not in question.options:
            raise ConfigError(
                "gold is not an option", file=str(path), field=f"questions.{index}.gold"
            )
        questions.append(question)
    return questions


def tree_hash(root: Path) -> str:
    """sha256 over the relative paths and bytes of every file under root."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def instruction_for(question: Question) -> str:
    """The task text the agent sees."""
    options = "\n".join(f"{key}) {text}" for key, text in sorted(question.options.items()))
    return (
        "The repository in your workspace is a small Python project. Inspect its files to "
        f"answer this question.\n\nQuestion: {question.question}\n{options}\n\n"
        "When you know, call submit with the letter of the correct option."
    )


@dataclass
class DemoSettings:
    """Resolved demo configuration (goes into the manifest)."""

    run_dir: Path
    model: str
    concurrency: int = 1
    new_layer: str | None = None
    progress: bool | None = None
    questions: Path | None = None  # defaults to the bundled question bank


class DemoAnswer(BaseModel):
    """One question's record (`answers.jsonl`): the agent's answer, or, with only the first
    five fields, a harness failure. Written and read back with the fields it was given
    (`exclude_unset`), so both shapes keep their JSON; the run directory's own stamps
    (layer, time) are kept as extra fields."""

    model_config = ConfigDict(extra="allow")

    question_id: str
    status: str
    stop_reason: str = ""
    infra_error: bool = False
    error: str | None = None
    attempt: str | None = None
    answer: str | None = None
    gold: str | None = None
    correct: bool = False
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    novel_retrieval_bytes: int = 0
    novel_tool_call_bytes: int = 0
    wall_clock_s: float | None = None
    workspace: str | None = None
    transcript_blob: str | None = None
    model_calls_blob: str | None = None

    def record(self) -> dict[str, Any]:
        """The JSON of this record, with the fields it was given."""
        return self.model_dump(exclude_unset=True)


class DemoSummary(BaseModel):
    """`summary.json`: accuracy over answered questions, infrastructure failures apart."""

    model: str
    questions: int
    scored: int
    infra_errors: int
    missing: int
    correct: int
    accuracy: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    rows: list[DemoAnswer]
    skipped_completed: list[str] = Field(default_factory=list)
    ran: list[str] = Field(default_factory=list)


def _answer_one(agent: ToolLoopAgent, question: Question, run: RunDir) -> DemoAnswer:
    attempt = uuid.uuid4().hex[:8]
    workspace = Workspace.read_only_clone(
        bundle_dir() / "repo", run.path / "workspaces" / f"{question.id}-{attempt}"
    )
    task = Task(
        id=question.id,
        instruction=instruction_for(question),
        metadata={"answer_schema": {"type": "string", "enum": list(LETTERS)}, "seed": 0},
    )
    result = agent.run(task, workspace, DEMO_LIMITS)
    answer = (result.submission or "").strip().upper()[:1] or None
    return DemoAnswer(
        question_id=question.id,
        attempt=attempt,
        status=result.status,
        stop_reason=result.stop_reason,
        infra_error=result.infra_error,
        error=result.error,
        answer=answer,
        gold=question.gold,
        correct=answer == question.gold,
        steps=result.steps,
        usage=result.usage,
        cost_usd=result.cost_usd,
        novel_retrieval_bytes=result.effort.novel_retrieval_bytes,
        novel_tool_call_bytes=result.effort.novel_tool_call_bytes,
        wall_clock_s=round(result.wall_clock_s, 3),
        workspace=str(workspace.path.relative_to(run.path.resolve())),
        transcript_blob=run.blobs.put(
            "\n".join(e.model_dump_json(exclude_none=True) for e in result.transcript)
        ),
        model_calls_blob=run.blobs.put(_jsonl(result.model_calls)),
    )


def _jsonl(items: list[dict[str, Any]]) -> str:
    import json

    return "\n".join(json.dumps(item, sort_keys=True) for item in items)


def _infra_record(outcome: JobOutcome) -> DemoAnswer:
    return DemoAnswer(
        question_id=outcome.job.key,
        status="error",
        stop_reason=f"harness_{outcome.status}",
        infra_error=True,
        error=(outcome.error or "")[-4000:],
    )


def run_demo(settings: DemoSettings) -> DemoSummary:
    """Answer the questions not yet answered in the run directory; return the summary."""
    bank_path = settings.questions or bundle_dir() / "questions.yaml"
    questions = load_questions(bank_path)  # bad input fails here and on the next line,
    model = get_model(settings.model)  # before any run directory exists
    agent = ToolLoopAgent(model)
    hashes = {
        "prompt:toolloop_system": SYSTEM_PROMPT + JSON_MODE_HINT,
        "question_bank": bank_path.read_text(encoding="utf-8"),
        "repository": tree_hash(bundle_dir() / "repo"),
        "price_table": price_table().sha256,
    }
    config = {
        "model": settings.model,
        "limits": DEMO_LIMITS.model_dump(),
        "questions": len(questions),
    }
    run = RunDir.open(
        settings.run_dir,
        protocol="demo",
        config=config,
        hashes=hashes,
        seeds={"model_seed": 0},
        new_layer=settings.new_layer,
    )
    try:
        done = {cell[0] for cell in run.completed_cells(RECORDS, ("question_id",))}
        todo = [q for q in questions if q.id not in done]
        writer = run.records(RECORDS)

        def record(outcome: JobOutcome) -> Future[None]:
            answer = outcome.value if outcome.status == "done" else _infra_record(outcome)
            return writer.submit(answer.record())

        jobs = [
            Job(key=q.id, fn=partial(_answer_one, agent, q, run), timeout_s=600, label=q.id)
            for q in todo
        ]
        executor = LocalExecutor(settings.concurrency, settings.progress, "demo questions")
        executor.run(jobs, record)
        answers = [DemoAnswer.model_validate(r) for r in run.read(RECORDS)]
        summary = summarize(latest_by_question(answers), questions, settings.model)
        summary.skipped_completed = sorted(done)
        summary.ran = [q.id for q in todo]
        run.write_summary(summary.model_dump(exclude_unset=True))
        run.write_document("report.md", render_report(summary), scrub=False)
        return summary
    finally:
        run.close()


def latest_by_question(records: list[DemoAnswer]) -> dict[str, DemoAnswer]:
    """The last record of each question (records are append-only; later wins)."""
    return {row.question_id: row for row in records}


def summarize(latest: dict[str, DemoAnswer], questions: list[Question], model: str) -> DemoSummary:
    """Accuracy over answered cells; infrastructure failures reported apart, never as wrong."""
    rows = [latest[q.id] for q in questions if q.id in latest]
    scored = [r for r in rows if not r.infra_error]
    costs = [r.cost_usd for r in scored]
    known_costs = [c for c in costs if c is not None]
    correct = sum(1 for r in scored if r.correct)
    return DemoSummary(
        model=model,
        questions=len(questions),
        scored=len(scored),
        infra_errors=len(rows) - len(scored),
        missing=len(questions) - len(rows),
        correct=correct,
        accuracy=correct / len(scored) if scored else None,
        input_tokens=sum(r.usage.input_tokens for r in scored),
        output_tokens=sum(r.usage.output_tokens for r in scored),
        cost_usd=round(sum(known_costs), 6) if len(known_costs) == len(costs) else None,
        rows=rows,
    )


def render_report(summary: DemoSummary) -> str:
    """A short Markdown report of the demo run."""
    accuracy = summary.accuracy
    acc_text = "n/a" if accuracy is None else f"{accuracy:.0%}"
    cost = summary.cost_usd
    columns = ["question", "answer", "gold", "correct", "status", "steps", "bytes", "tokens"]
    table = [
        [
            r.question_id,
            r.answer or "-",
            r.gold or "-",
            "yes" if r.correct else "no",
            r.status + (" (infra)" if r.infra_error else ""),
            r.steps,
            r.novel_retrieval_bytes + r.novel_tool_call_bytes,
            r.usage.input_tokens + r.usage.output_tokens,
        ]
        for r in summary.rows
    ]
    return md_document(
        "# metaeval demo\n\n"
        f"Model {md_code(summary.model)} answered {summary.scored} of {summary.questions} "
        f"questions about the bundled `tinyqueue` repository; {summary.correct} correct "
        f"(accuracy {acc_text}). Infrastructure errors: {summary.infra_errors}; "
        f"missing: {summary.missing}.\n\n"
        f"Tokens: {summary.input_tokens} in, {summary.output_tokens} out. "
        f"Cost: {'unknown (model not in price table)' if cost is None else f'${cost:.4f}'}.\n\n"
        "Bytes are novel inspection bytes (retrieval + tool-call), as build-and-find defines.\n\n"
        + markdown_table(columns, table)
    )
