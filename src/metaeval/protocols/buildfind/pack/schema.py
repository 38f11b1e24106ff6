"""The schema of a build-and-find task's three files, as typed models.

Each task directory holds `task.yaml` (`TaskConfig`), `spec.yaml` (`Spec`: behavior and
design items with stable ids) and `questions.yaml` (`QuestionBank`: four-option
multiple-choice questions, each traced to spec item ids). A loaded task is a `PackTask`, a
loaded pack a `Pack`; `load` reads and checks the files into them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from metaeval.errors import ConfigError

TASK_FILE = "task.yaml"
SPEC_FILE = "spec.yaml"
QUESTIONS_FILE = "questions.yaml"
TASK_FILES = (TASK_FILE, SPEC_FILE, QUESTIONS_FILE)
OPTION_KEYS = ("A", "B", "C", "D")
SPEC_KINDS = ("behavior", "design")

Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
PositiveSeconds = Annotated[float, Field(gt=0, le=7 * 24 * 3600, strict=True)]  # at most a week


def _custom_error(kind: str, detail: str) -> PydanticCustomError:
    # the detail goes through the context so braces in option texts are not format fields
    return PydanticCustomError(kind, "{detail}", {"detail": detail})


class TaskConfig(BaseModel):
    """`task.yaml`: how to build, probe and time-box one task."""

    model_config = ConfigDict(extra="forbid")

    language: Text
    compile_probe: Text  # shell command run inside the artifact; exit code 0 means it compiles
    build_time_s: PositiveSeconds
    find_time_s: PositiveSeconds
    starter: Text | None = None  # directory relative to the task dir, copied into the build
    # the file marking a project's root (e.g. Cargo.toml): an artifact failing the probe with
    # exactly one nested copy is probed again there (the relaxed probe, paper Table 10)
    project_file: Text | None = Field(default=None, pattern=r"^[^/\\]+$")
    description: str = ""


class SpecItem(BaseModel):
    """One intended behavior or design choice of the hidden specification."""

    model_config = ConfigDict(extra="forbid")

    id: Identifier
    kind: Literal["behavior", "design"]
    text: Text


class Spec(BaseModel):
    """`spec.yaml`: the hidden specification the builder receives and the finder never sees."""

    model_config = ConfigDict(extra="forbid")

    items: list[SpecItem] = Field(min_length=1)

    def ids(self) -> list[str]:
        """Spec item ids in file order."""
        return [item.id for item in self.items]

    def item(self, item_id: str) -> SpecItem:
        """The item with this id; ConfigError if there is none."""
        for item in self.items:
            if item.id == item_id:
                return item
        raise ConfigError(f"no spec item {item_id!r}", file=SPEC_FILE, field="items")


class Question(BaseModel):
    """A four-option multiple-choice question whose gold answer is traced to spec items."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    id: Identifier
    question: Text
    options: dict[str, Text]
    gold: str
    traces: list[Identifier]
    tags: list[str] = Field(default_factory=list)

    @field_validator("options")
    @classmethod
    def _check_options(cls, options: dict[str, str]) -> dict[str, str]:
        issues = []
        if set(options) != set(OPTION_KEYS):
            got = ", ".join(sorted(options)) or "none"
            issues.append(f"options must have exactly the keys A, B, C, D (got {got})")
        first_key_of: dict[str, str] = {}
        for key in sorted(options):
            normal = " ".join(options[key].split()).casefold()
            if normal in first_key_of:
                issues.append(f"options {first_key_of[normal]} and {key} have the same text")
            else:
                first_key_of[normal] = key
        if issues:
            raise _custom_error("pack_options", "; ".join(issues))
        return {key: options[key] for key in OPTION_KEYS}

    @field_validator("gold")
    @classmethod
    def _check_gold(cls, gold: str, info: ValidationInfo) -> str:
        options = info.data.get("options")
        keys = tuple(options) if options is not None else OPTION_KEYS
        if gold not in keys:
            raise _custom_error(
                "pack_gold", f"gold {gold!r} is not one of the option keys ({', '.join(keys)})"
            )
        return gold

    @field_validator("traces")
    @classmethod
    def _check_traces(cls, traces: list[str]) -> list[str]:
        if not traces:
            raise _custom_error("pack_traces", "a question must trace to at least one spec item")
        return traces


class QuestionBank(BaseModel):
    """`questions.yaml`: the question bank the finder answers."""

    model_config = ConfigDict(extra="forbid")

    questions: list[Question] = Field(min_length=1)


class PackTask(BaseModel):
    """One loaded task. The raw spec and question texts are kept for hashing into manifests."""

    task_id: str
    root: Path
    config: TaskConfig
    spec: Spec
    questions: list[Question]
    spec_text: str
    questions_text: str

    @property
    def starter_dir(self) -> Path | None:
        """The starter tree to seed the builder's workspace with, if the task has one."""
        return self.root / self.config.starter if self.config.starter else None

    @property
    def spec_hash(self) -> str:
        """SHA-256 (hex) of the raw spec.yaml text."""
        return hashlib.sha256(self.spec_text.encode("utf-8")).hexdigest()

    @property
    def questions_hash(self) -> str:
        """SHA-256 (hex) of the raw questions.yaml text."""
        return hashlib.sha256(self.questions_text.encode("utf-8")).hexdigest()

    def question(self, question_id: str) -> Question:
        """The question with this id; ConfigError if there is none."""
        for question in self.questions:
            if question.id == question_id:
                return question
        raise ConfigError(
            f"no question {question_id!r}",
            file=str(self.root / QUESTIONS_FILE),
            field="questions",
        )


class Pack(BaseModel):
    """A loaded, valid pack: tasks keyed by task id (the directory name), in sorted order."""

    root: Path
    tasks: dict[str, PackTask]

    def task(self, task_id: str) -> PackTask:
        """The task with this id; ConfigError naming the known ids if there is none."""
        if task_id not in self.tasks:
            known = ", ".join(self.tasks) or "none"
            raise ConfigError(f"unknown task {task_id!r} (known: {known})", file=str(self.root))
        return self.tasks[task_id]
