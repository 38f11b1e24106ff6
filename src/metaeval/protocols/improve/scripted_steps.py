"""The scripted meta-agent's reference edits for demos and tests.

Five steps, one per trial, each a function of the optimizer worktree:
1. improve: add playbook recipes (from two optimize tasks' reference solutions) -> promoted;
2. regress: disable recipe matching -> scores below its parent -> rejected;
3. cross the boundary: edit README.md outside `target_agent/` -> meta_agent_failure;
4. break: a syntax error in the PACT entry point -> the candidate cannot launch ->
   target_agent_failure;
5. neutral: reword the system prompt -> no strict gain -> rejected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

IMPROVE_TASKS = ("count-error-lines", "csv-column")


def _recipe(task_dir: Path) -> tuple[tuple[str, ...], str]:
    title = task_dir.joinpath("instruction.md").read_text().splitlines()[0].lstrip("# ").strip()
    script = task_dir.joinpath("solution", "solve.sh").read_text()
    body = "\n".join(line for line in script.splitlines() if not line.startswith("#!"))
    return tuple(title.split()), body


def improve(suite_dir: Path, tasks: tuple[str, ...] = IMPROVE_TASKS):
    def step(worktree: Path, _: dict[str, Any]) -> str:
        playbook = worktree / "target_agent" / "playbook.py"
        recipes = [_recipe(suite_dir / task) for task in tasks]
        lines = [f"RECIPES.append(({keywords!r}, ({command!r},)))" for keywords, command in recipes]
        playbook.write_text(playbook.read_text() + "\n" + "\n".join(lines) + "\n")
        return f"add playbook recipes for {', '.join(tasks)}"

    return step


def regress(worktree: Path, _: dict[str, Any]) -> str:
    playbook = worktree / "target_agent" / "playbook.py"
    text = playbook.read_text().replace(
        "    text = instruction.lower()", "    return None\n    text = instruction.lower()"
    )
    playbook.write_text(text)
    return "disable recipe matching"


def cross_boundary(worktree: Path, _: dict[str, Any]) -> str:
    readme = worktree / "README.md"
    readme.write_text(readme.read_text() + "\nThe target agent always succeeds.\n")
    (worktree / "target_agent" / "prompts.py").write_text(
        (worktree / "target_agent" / "prompts.py").read_text() + "\n"
    )
    return "edit README.md (outside the boundary)"


def break_candidate(worktree: Path, _: dict[str, Any]) -> str:
    pact = worktree / "target_agent" / "pact.py"
    pact.write_text(pact.read_text() + "\ndef broken(:\n")
    return "introduce a syntax error into the PACT entry point"


def neutral(worktree: Path, _: dict[str, Any]) -> str:
    prompts = worktree / "target_agent" / "prompts.py"
    prompts.write_text(
        prompts.read_text().replace("Keep commands short.", "Prefer short commands.")
    )
    return "reword the system prompt"


def demo_steps(suite_dir: Path | None = None) -> list:
    """The five reference steps, recipes taken from the bundled terminal suite."""
    if suite_dir is None:
        from metaeval.examples import example_path

        suite_dir = example_path("improve-suites/terminal")
    return [improve(suite_dir), regress, cross_boundary, break_candidate, neutral]
