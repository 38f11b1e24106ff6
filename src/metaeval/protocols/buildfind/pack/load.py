"""Build-and-find task packs: validation and loading (the files' schema is `schema`).

A pack is a directory with one sub-directory per task (`<pack>/<task_id>/`). Each task holds

- `task.yaml`: language, compile probe, build and find time budgets, optional starter tree;
- `spec.yaml`: the hidden specification, a list of behavior and design items with stable ids;
- `questions.yaml`: four-option multiple-choice questions, each traced to spec item ids.

`validate_pack` collects every problem it can find (it does not stop at the first one) and
reports each with the file, relative to the pack root, and the dotted field it concerns.
`load_pack` returns typed objects, or raises `PackError` listing all problems.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.config_files import field_path, parse_yaml
from metaeval.errors import ConfigError
from metaeval.examples import example_path
from metaeval.protocols.buildfind.pack.schema import (
    SPEC_FILE,
    TASK_FILES,
    Pack,
    PackTask,
    QuestionBank,
    Spec,
    TaskConfig,
)
from metaeval.records.names import name_problem
from metaeval.tasks.safe_files import classify, read_regular, walk_tree

MAX_PACK_FILE_BYTES = 8 * 1024 * 1024
MAX_LISTED_ENTRIES = 20


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
        """The validated model, or None after recording each schema error with its field
        (and, for an entry of a list with ids, the entry's id in the message)."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                loc = error["loc"]
                self.add(path, field_path(loc) or None, named(loc, data) + error["msg"])
            return None


def named(loc: Sequence[int | str], data: Any) -> str:
    """``question 'q3': `` when `loc` points into a list entry that has an id (the 0-based
    field path alone does not say which question a person wrote), else ``""``."""
    if len(loc) >= 2 and isinstance(loc[1], int) and isinstance(data, dict):
        entries = data.get(loc[0])
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(entry_id, str) and entry_id:
            return f"{str(loc[0]).removesuffix('s')} {entry_id!r}: "
    return ""


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
    config = _check_task_config(task_dir, task_path, out)
    spec, spec_text, spec_ids = _check_spec(spec_path, out)
    bank, questions_text = _check_questions(questions_path, spec_ids, out)
    if len(out.problems) > before or config is None or spec is None or bank is None:
        return None
    task = PackTask(
        task_id=task_id,
        root=task_dir,
        config=config,
        spec=spec,
        questions=bank.questions,
        spec_text=spec_text,
        questions_text=questions_text,
    )
    return task if _expected_answers_ok(task, out) else None


def _expected_answers_ok(task: PackTask, out: _Collector) -> bool:
    """Whether the task's reference/expected_answers.yaml, when it has one, covers exactly
    its questions for every reference builder (a problem is recorded otherwise)."""
    from metaeval.protocols.buildfind.pack.expected_answers import (
        EXPECTED_ANSWERS_FILE,
        REFERENCE_DIR,
        load_expected_answers,
    )

    path = task.root / REFERENCE_DIR / EXPECTED_ANSWERS_FILE
    if not path.exists():
        return True
    try:
        load_expected_answers(task)
    except ConfigError as exc:
        out.add(path, exc.field, exc.message)
        return False
    return True


def _check_task_config(task_dir: Path, task_path: Path, out: _Collector) -> TaskConfig | None:
    """task.yaml as a model, its starter tree checked (a directory inside the task dir)."""
    loaded = out.read_yaml(task_path)
    if loaded is None:
        return None
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
    return config


def _check_spec(spec_path: Path, out: _Collector) -> tuple[Spec | None, str, set[str] | None]:
    """(spec, its text, its item ids) of spec.yaml; the ids are None when it has no item list."""
    loaded = out.read_yaml(spec_path)
    if loaded is None:
        return None, "", None
    spec_text, data = loaded
    spec = out.validate(Spec, data, spec_path)
    items = _raw_list(data, "items")
    _duplicate_ids(items, "items", "spec item", spec_path, out)
    spec_ids = None
    if isinstance(data.get("items"), list):
        spec_ids = {item["id"] for item in items if isinstance(item, dict) and "id" in item}
    return spec, spec_text, spec_ids


def _check_questions(
    questions_path: Path, spec_ids: set[str] | None, out: _Collector
) -> tuple[QuestionBank | None, str]:
    """(question bank, its text) of questions.yaml; traces are checked against `spec_ids`
    (only when the spec was readable)."""
    loaded = out.read_yaml(questions_path)
    if loaded is None:
        return None, ""
    questions_text, data = loaded
    bank = out.validate(QuestionBank, data, questions_path)
    questions = _raw_list(data, "questions")
    _duplicate_ids(questions, "questions", "question", questions_path, out)
    if spec_ids is not None:
        for q_index, question in enumerate(questions):
            traces = question.get("traces") if isinstance(question, dict) else None
            for t_index, trace in enumerate(traces if isinstance(traces, list) else []):
                if isinstance(trace, str) and trace not in spec_ids:
                    out.add(
                        questions_path,
                        f"questions.{q_index}.traces.{t_index}",
                        f"trace {trace!r} is not a spec item id in {SPEC_FILE}",
                    )
    return bank, questions_text


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
    return example_path("buildfind-pack")
