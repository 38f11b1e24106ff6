"""Build-and-find task packs: schema, validation and loading.

A pack is a directory with one sub-directory per task (`<pack>/<task_id>/`). Each task holds

- `task.yaml`: language, compile probe, build and find time budgets, optional starter tree;
- `spec.yaml`: the hidden specification, a list of behavior and design items with stable ids;
- `questions.yaml`: four-option multiple-choice questions, each traced to spec item ids.

`validate_pack` collects every problem it can find (it does not stop at the first one) and
reports each with the file, relative to the pack root, and the dotted field it concerns.
`load_pack` returns typed objects, or raises `PackError` listing all problems.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from metaeval.config_files import field_path, parse_yaml
from metaeval.errors import ConfigError
from metaeval.records.names import name_problem
from metaeval.tasks.safe_files import classify, read_regular, walk_tree

TASK_FILE = "task.yaml"
SPEC_FILE = "spec.yaml"
QUESTIONS_FILE = "questions.yaml"
TASK_FILES = (TASK_FILE, SPEC_FILE, QUESTIONS_FILE)
OPTION_KEYS = ("A", "B", "C", "D")
MAX_PACK_FILE_BYTES = 8 * 1024 * 1024
MAX_LISTED_ENTRIES = 20
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


@dataclass(frozen=True)
class Problem:
    """One validation problem. `file` is relative to the pack root ('.' for the root itself)."""

    file: str
    field: str | None
    message: str

    def __str__(self) -> str:
        if self.field:
            return f"{self.file}: field '{self.field}': {self.message}"
        return f"{self.file}: {self.message}"


class PackError(ConfigError):
    """A pack (or task) that failed validation; `problems` holds every problem found."""

    def __init__(self, message: str, problems: list[Problem], *, file: str, field: str | None):
        self.problems = list(problems)
        super().__init__(message, file=file, field=field)


def format_problems(problems: list[Problem]) -> str:
    """One line per problem: `file: field 'x': message`."""
    return "\n".join(str(problem) for problem in problems)


class _Collector:
    """Problems of one validation pass, with file names relative to the pack root."""

    def __init__(self, base: Path):
        self.base = base
        self.problems: list[Problem] = []

    def rel(self, path: Path) -> str:
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            rel = path.as_posix()
        return rel or "."

    def add(self, path: Path, field: str | None, message: str) -> None:
        self.problems.append(Problem(self.rel(path), field, message))

    def read_yaml(self, path: Path) -> tuple[str, Any] | None:
        """(text, data) of a YAML mapping file, or None after recording why it is unusable.

        The file is read only when it is a regular file (or a link to one) inside its task
        directory; a link leading elsewhere, a FIFO or a device is refused unread.
        """
        kind, detail = classify(path, path.parent)
        if kind == "outside_link":
            self.add(path, None, f"symlink leading outside the task directory ({detail}); not read")
            return None
        if kind == "special":
            self.add(path, None, f"not a regular file ({detail}); not read")
            return None
        if kind not in ("file", "link"):
            self.add(path, None, "missing file" if kind == "error" else "not a regular file")
            return None
        try:
            text = read_regular(path, path.parent, max_bytes=MAX_PACK_FILE_BYTES).decode("utf-8")
        except UnicodeDecodeError:
            self.add(path, None, "file is not valid UTF-8")
            return None
        except OSError as exc:
            self.add(path, None, f"cannot read: {exc}")
            return None
        try:
            data = parse_yaml(text, "")  # no file prefix: the problem names the file itself
        except ConfigError as exc:
            self.add(path, None, str(exc))
            return None
        if data is None:
            self.add(path, None, "file is empty; expected a mapping")
            return None
        if not isinstance(data, dict):
            self.add(path, None, f"expected a mapping at the top level, got {type(data).__name__}")
            return None
        return text, data

    def validate(self, model: type[BaseModel], data: Any, path: Path) -> Any:
        """The validated model, or None after recording each schema error with its field."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                self.add(path, field_path(error["loc"]) or None, error["msg"])
            return None


def _raw_list(data: Any, key: str) -> list[Any]:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, list) else []


def _duplicate_ids(entries: list[Any], key: str, what: str, path: Path, out: _Collector) -> None:
    first_index: dict[str, int] = {}
    for index, entry in enumerate(entries):
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(entry_id, str):
            continue
        if entry_id in first_index:
            out.add(
                path,
                f"{key}.{index}.id",
                f"duplicate {what} id {entry_id!r} (first used at {key}.{first_index[entry_id]})",
            )
        else:
            first_index[entry_id] = index


def _check_task(task_dir: Path, task_id: str, out: _Collector) -> PackTask | None:
    """Record every problem of one task directory; the loaded task when there are none."""
    before = len(out.problems)
    task_path, spec_path, questions_path = (task_dir / name for name in TASK_FILES)

    config = None
    loaded = out.read_yaml(task_path)
    if loaded is not None:
        config = out.validate(TaskConfig, loaded[1], task_path)
        starter = loaded[1].get("starter")
        if isinstance(starter, str) and starter.strip():
            target = (task_dir / starter.strip()).resolve()
            inside = task_dir.resolve() in target.parents  # the task dir itself holds the spec
            if Path(starter.strip()).is_absolute() or not inside:
                out.add(
                    task_path,
                    "starter",
                    f"starter {starter!r} must be a directory inside the task dir",
                )
            elif not target.is_dir():
                out.add(task_path, "starter", f"starter directory {starter!r} does not exist")
            else:
                _check_starter_tree(target, task_dir, task_path, out)

    spec, spec_text, spec_ids = None, "", None
    loaded = out.read_yaml(spec_path)
    if loaded is not None:
        spec_text, data = loaded
        spec = out.validate(Spec, data, spec_path)
        items = _raw_list(data, "items")
        _duplicate_ids(items, "items", "spec item", spec_path, out)
        if isinstance(data.get("items"), list):
            spec_ids = {item["id"] for item in items if isinstance(item, dict) and "id" in item}

    bank, questions_text = None, ""
    loaded = out.read_yaml(questions_path)
    if loaded is not None:
        questions_text, data = loaded
        bank = out.validate(QuestionBank, data, questions_path)
        questions = _raw_list(data, "questions")
        _duplicate_ids(questions, "questions", "question", questions_path, out)
        if spec_ids is not None:  # traces can only be checked against a readable spec
            for q_index, question in enumerate(questions):
                traces = question.get("traces") if isinstance(question, dict) else None
                for t_index, trace in enumerate(traces if isinstance(traces, list) else []):
                    if isinstance(trace, str) and trace not in spec_ids:
                        out.add(
                            questions_path,
                            f"questions.{q_index}.traces.{t_index}",
                            f"trace {trace!r} is not a spec item id in {SPEC_FILE}",
                        )

    if len(out.problems) > before or config is None or spec is None or bank is None:
        return None
    return PackTask(
        task_id=task_id,
        root=task_dir,
        config=config,
        spec=spec,
        questions=bank.questions,
        spec_text=spec_text,
        questions_text=questions_text,
    )


def _check_starter_tree(starter: Path, task_dir: Path, task_path: Path, out: _Collector) -> None:
    """Problems for starter files that would lead the build outside the task (links leaving
    the task directory) or cannot be copied (FIFOs, sockets, devices)."""
    bad = [
        entry
        for entry in walk_tree(starter, boundary=task_dir)
        if entry.kind in ("outside_link", "special")
    ]
    for entry in bad[:MAX_LISTED_ENTRIES]:
        out.add(task_path, "starter", f"starter file {entry.rel!r}: {entry.describe()}")
    if len(bad) > MAX_LISTED_ENTRIES:
        out.add(task_path, "starter", f"{len(bad) - MAX_LISTED_ENTRIES} more such starter files")


def _task_dirs(root: Path, out: _Collector) -> list[Path]:
    found = []
    for path in sorted(root.iterdir()):
        if path.name.startswith((".", "_")):
            continue
        kind, detail = classify(path, root)
        if kind == "outside_link":
            out.add(path, None, f"task directory is a symlink leading outside the pack ({detail})")
        elif kind in ("dir", "link_dir"):
            found.append(path)
    return found


def _check_pack(root: Path) -> tuple[list[Problem], dict[str, PackTask]]:
    out = _Collector(root)
    tasks: dict[str, PackTask] = {}
    if not root.is_dir():
        out.problems.append(Problem(str(root), None, "pack directory does not exist"))
        return out.problems, tasks
    task_dirs = _task_dirs(root, out)
    if not task_dirs and not out.problems:
        out.add(root, None, "pack has no task directories")
    for task_dir in task_dirs:
        problem = name_problem(task_dir.name)
        if problem is not None:  # the task id names directories of the run
            out.add(task_dir, None, f"task directory name: {problem}")
            continue
        task = _check_task(task_dir, task_dir.name, out)
        if task is not None:
            tasks[task.task_id] = task
    return out.problems, tasks


def _raise(problems: list[Problem], base: Path, what: str) -> None:
    if len(problems) == 1:
        only = problems[0]
        raise PackError(only.message, problems, file=str(base / only.file), field=only.field)
    raise PackError(
        f"{len(problems)} problems in {what}:\n{format_problems(problems)}",
        problems,
        file=str(base),
        field=None,
    )


def validate_pack(path: str | Path) -> list[Problem]:
    """Every problem of the pack at `path`, in task and file order; empty when it is valid."""
    problems, _ = _check_pack(Path(path))
    return problems


def load_pack(path: str | Path) -> Pack:
    """Load a valid pack; raise PackError (a ConfigError) listing all problems otherwise."""
    root = Path(path)
    problems, tasks = _check_pack(root)
    if problems:
        _raise(problems, root, "task pack")
    return Pack(root=root, tasks=tasks)


def load_task(task_dir: str | Path, task_id: str | None = None) -> PackTask:
    """Load one task directory on its own (task id defaults to the directory name).

    Problem files are named relative to the directory holding the task, as in a pack.
    """
    task_dir = Path(task_dir)
    out = _Collector(task_dir.parent)
    task = None
    if task_dir.is_dir():
        task = _check_task(task_dir, task_id or task_dir.name, out)
    else:
        out.add(task_dir, None, "task directory does not exist")
    if task is None:
        _raise(out.problems, task_dir.parent, "task")
    assert task is not None
    return task


def example_pack_dir() -> Path:
    """Path of examples/buildfind-pack, from the installed package or the source tree."""
    candidates = [
        Path(str(resources.files("metaeval"))) / "_examples" / "buildfind-pack",
        Path(__file__).resolve().parents[4] / "examples" / "buildfind-pack",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise ConfigError("example pack not found (examples/buildfind-pack)", file=str(candidates[-1]))
