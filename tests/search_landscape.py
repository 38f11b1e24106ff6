"""A synthetic landscape for the search policies (issue 41): two known patches, each fixing
half of a four-task optimize suite, that a three-way merge combines and that do not apply on
top of each other (their edits are one line apart, inside each other's diff context).

The target is the toolloop agent (model none: it runs recipes only), whose playbook gets two
recipe tables separated by one line; patch A fills table A (recipes for HALF_A), patch B
table B (HALF_B). `LandscapeMetaAgent` proposes A in trial 1 and B in trial 2; later, when it
is offered a population, it merges its parent with the member passing the other half;
otherwise it replays its known patches (now stale: they name no parent and no longer apply),
and in trial 4 names a second parent though none is offered.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from metaeval.agents.types import Limits
from metaeval.protocols.improve.gitops import CONTEXT_DIR
from metaeval.protocols.improve.init_target import init_target
from metaeval.protocols.improve.records import MetaOutput
from metaeval.protocols.improve.scripted_steps import _recipe

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "improve-suites" / "terminal"
HALF_A = ("count-error-lines", "csv-column")
HALF_B = ("sort-unique-words", "dedupe-lines")
HELD_OUT = ("fix-config-port",)
PLAYBOOK = "target_agent/playbook.py"
TABLES = (
    "\nRECIPES_A: list = []\n"
    "# the two halves of the landscape: one line apart\n"
    "RECIPES_B: list = []\n"
    "RECIPES.extend(RECIPES_A + RECIPES_B)\n"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def _filled(text: str, table: str, tasks: tuple[str, ...]) -> str:
    recipes = []
    for task in tasks:
        keywords, command = _recipe(SUITE / task)
        recipes.append(repr((keywords, (command,))))
    return text.replace(f"{table}: list = []", f"{table}: list = [{', '.join(recipes)}]")


def _diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        f"a/{PLAYBOOK}",
        f"b/{PLAYBOOK}",
    )
    return "".join(lines)


def landscape(tmp_path: Path, policy: str, budget: int = 4, **search: Any) -> Path:
    """The landscape experiment in tmp_path; returns its manifest (bundle: tmp_path/bundle)."""
    repo = tmp_path / "target"
    init_target("toolloop", repo)
    playbook = repo / PLAYBOOK
    playbook.write_text(playbook.read_text() + TABLES)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two tables")
    suites = tmp_path / "suites"
    shutil.copytree(SUITE, suites / "terminal")
    for name, split, tasks in (
        ("optimize", "optimize", HALF_A + HALF_B),
        ("held_out", "held_out", HELD_OUT),
    ):
        config = {
            "name": f"landscape-{name}",
            "tasks_dir": "terminal",
            "split_id": split,
            "task_ids": list(tasks),
            "max_steps_per_task": 8,
            "task_timeout_s": 120,
            "command_timeout_s": 30,
        }
        (suites / f"{name}.json").write_text(json.dumps(config))
    profile = ROOT / "examples" / "improve" / "profiles" / "toolloop_target.json"
    manifest = {
        "mode": "recursive_search",
        "sut": {
            "name": "landscape",
            "contract": "patch/1",
            "meta_agent": {"agent": "scripted"},
            "timeout_s": 60,
            "sum_profile": str(profile),
        },
        "sum": {"model": "none"},
        "baseline": {"repo": str(repo)},
        "evaluation": {
            "optimize": {"suite_config": "suites/optimize.json"},
            "held_out": {
                "required": True,
                "suite_config": "suites/held_out.json",
                "selection_gate": "must_not_regress",
            },
        },
        "trial_budget": budget,
        "output": "bundle",
        "seed": 41,
        "search": {"policy": policy, "proposals_per_round": 2, **search},
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def known_patches(repo: Path) -> dict[str, str]:
    """Patch A and patch B, both made against the baseline's playbook."""
    base = _git(repo, "show", f"HEAD:{PLAYBOOK}")
    return {
        "A": _diff(base, _filled(base, "RECIPES_A", HALF_A)),
        "B": _diff(base, _filled(base, "RECIPES_B", HALF_B)),
    }


class LandscapeMetaAgent:
    """Proposes the landscape's known patches and merges (see the module docstring).
    `block_trial`: that trial's proposal waits for `release` (a run killed meanwhile)."""

    contract = "patch/1"
    name = "landscape"

    def __init__(self, repo: Path, block_trial: int | None = None, by_file: bool = False):
        self.patches = known_patches(repo)
        self.block_trial = block_trial
        self.by_file = by_file  # name a merge's second parent as a lane that only edits
        self.release = threading.Event()
        self.calls: list[int] = []

    def propose(self, given: dict[str, Any], worktree: Path, limits: Limits) -> MetaOutput:
        trial = int(given["trial"])
        self.calls.append(trial)
        if trial == self.block_trial:
            self.release.wait()
        if trial <= 2:
            name = "A" if trial == 1 else "B"
            return MetaOutput(status="ok", summary=f"patch {name}", patch=self.patches[name])
        population = given.get("population")
        parent = given["parent"]["id"]
        if population is not None:
            mine = next(m for m in population if m["id"] == parent)
            missing = set(HALF_A + HALF_B) - set(mine["passed_tasks"])
            other = next((m for m in population if set(m["passed_tasks"]) == missing), None)
            if missing and other is not None and self.by_file:
                (worktree / CONTEXT_DIR / "second_parent").write_text(other["id"] + "\n")
                return MetaOutput(status="ok", summary=f"merge {parent} with {other['id']}")
            if missing and other is not None:
                return MetaOutput(
                    status="ok",
                    summary=f"merge {parent} with {other['id']}",
                    parent=parent,
                    second_parent=other["id"],
                )
        elif trial == 4:  # no population offered (recursive): ask for a merge anyway
            return MetaOutput(
                status="ok", summary="merge", parent=parent, second_parent="trial-001"
            )
        name = "A" if trial % 2 else "B"
        return MetaOutput(status="ok", summary=f"replay patch {name}", patch=self.patches[name])
