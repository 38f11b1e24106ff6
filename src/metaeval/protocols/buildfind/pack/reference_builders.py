"""Scripted reference builders, so build-and-find runs end to end without any model.

Each task of a pack may ship reference repositories under `<task>/reference/<builder>/`:

- `documented`: the whole spec, with a README on the design and docstrings;
- `terse`: the whole spec with minimal documentation and short names;
- `divergent`: two behaviors left out and two implemented differently from the spec.

A reference builder writes its repository file by file with the ordinary write_file tool and
then submits, so its run is recorded like any other builder's. `<task>/reference/
expected_answers.yaml` holds, per builder, what a perfect finder would answer on that
artifact (a letter, or null when the artifact supports no option).
"""

from __future__ import annotations

from pathlib import Path

from metaeval.agents.scripted import Action, ScriptedAgent
from metaeval.agents.types import Task
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.pack.expected_answers import (
    REFERENCE_BUILDERS,
    REFERENCE_DIR,
    load_expected_answers,
)
from metaeval.protocols.buildfind.pack.load import load_task
from metaeval.protocols.buildfind.pack.schema import PackTask
from metaeval.sandbox.workspace import (
    STRIPPED_DIR_NAMES,
    STRIPPED_DIR_SUFFIXES,
    STRIPPED_FILE_SUFFIXES,
)

SUBMIT_ANSWER = "done"


def _check_builder(builder: str) -> None:
    if builder not in REFERENCE_BUILDERS:
        raise ConfigError(
            f"unknown reference builder {builder!r} (known: {', '.join(REFERENCE_BUILDERS)})",
            field="builder",
        )


def reference_dir(pack_task: PackTask, builder: str) -> Path:
    """Directory of one reference repository: `<task>/reference/<builder>/`."""
    _check_builder(builder)
    path = pack_task.root / REFERENCE_DIR / builder
    if not path.is_dir():
        raise ConfigError(
            f"task {pack_task.task_id!r} has no {builder!r} reference repository", file=str(path)
        )
    return path


def _skipped(rel: Path) -> bool:
    """Build outputs (e.g. __pycache__ left by a compile probe) are not part of the repo."""
    dirs = rel.parts[:-1]
    if any(d in STRIPPED_DIR_NAMES or d.endswith(STRIPPED_DIR_SUFFIXES) for d in dirs):
        return True
    return rel.name.endswith(STRIPPED_FILE_SUFFIXES)


def reference_files(pack_task: PackTask, builder: str) -> dict[str, str]:
    """Relative POSIX path -> exact text (line endings kept) of every file of the repo, sorted."""
    root = reference_dir(pack_task, builder)
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() and not path.is_symlink():
            continue
        if _skipped(rel):
            continue
        if path.is_symlink() or not path.is_file():
            raise ConfigError("reference repositories hold regular files only", file=str(path))
        try:
            with path.open(encoding="utf-8", newline="") as handle:
                files[rel.as_posix()] = handle.read()
        except UnicodeDecodeError as exc:
            raise ConfigError("reference files must be UTF-8 text", file=str(path)) from exc
    if not files:
        raise ConfigError("reference repository is empty", file=str(root))
    return files


def reference_actions(pack_task: PackTask, builder: str) -> list[Action]:
    """write_file actions for every file of the reference repo (sorted), then submit."""
    actions: list[Action] = [
        ("write_file", {"path": rel, "content": text})
        for rel, text in reference_files(pack_task, builder).items()
    ]
    actions.append(("submit", {"answer": SUBMIT_ANSWER}))
    return actions


def _task_actions(builder: str, task: Task) -> list[Action]:
    root = task.metadata.get("pack_task_root")
    if not isinstance(root, str) or not root:
        raise ConfigError(
            f"task {task.id!r} has no pack_task_root in its metadata",
            field="metadata.pack_task_root",
        )
    task_id = task.metadata.get("task_id")
    pack_task = load_task(Path(root), task_id=task_id if isinstance(task_id, str) else None)
    return reference_actions(pack_task, builder)


def reference_agent(builder: str) -> ScriptedAgent:
    """A scripted builder that writes the `builder` reference repo of whichever task it gets.

    The task's metadata must carry `pack_task_root` (the task directory) and `task_id`.
    """
    _check_builder(builder)

    def actions(task: Task) -> list[Action]:
        return _task_actions(builder, task)

    return ScriptedAgent(actions, name=f"reference:{builder}")


def gold_answer_map(pack_task: PackTask) -> dict[str, str]:
    """Question id -> gold option key, in question order."""
    return {question.id: question.gold for question in pack_task.questions}


def reference_finder_answers(pack_task: PackTask, builder: str) -> dict[str, str | None]:
    """What a perfect finder answers on the `builder` reference artifact, per question id.

    Gold for documented and terse; for divergent, the option the artifact supports, or None
    where the behavior is left out.
    """
    _check_builder(builder)
    return load_expected_answers(pack_task)[builder]
