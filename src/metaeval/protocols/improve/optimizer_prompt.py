"""What the meta-agent reads each trial: its instruction and `optimizer_context.md`."""

from __future__ import annotations

import json
from typing import Any


def render_instruction(contract_input: dict[str, Any]) -> str:
    """The meta-agent's instruction for one trial (optimizer_instruction.md)."""
    parent = contract_input["parent"]
    boundary = contract_input["boundary"]
    lines = [
        "# Improve the target agent",
        "",
        "The current directory is the target agent's repository at the active parent "
        f"`{parent['id']}` (optimize score {parent['optimize_score']}).",
        "Change the agent so that it solves more tasks of the optimize suite. You may edit only "
        f"files under `{boundary.get('mutable_root') or '.'}` within these paths: "
        f"{', '.join(boundary.get('allowed_paths') or ['(everything under the root)'])}.",
        "Do not touch `.git`, symlinks or `.aie_bench_recursive/` (benchmark-owned).",
        f"Remaining trial budget: {contract_input['remaining_budget']}.",
        "",
        "Context for this trial is in `.aie_bench_recursive/optimizer_context.md`. When your edits",
        "are done, call submit with a one-line summary of the change.",
    ]
    return "\n".join(lines) + "\n"


def render_context(contract_input: dict[str, Any]) -> str:
    """optimizer_context.md: target state, feedback from previous trials, boundary, budget."""
    lines = [
        "# Optimizer context",
        "",
        f"Trial {contract_input['trial']}; parent {contract_input['parent']['id']}.",
        "",
    ]
    lines.append("## Target files")
    lines += [f"- {f}" for f in contract_input["target_state"]["files"]]
    results = contract_input.get("parent_results") or {}
    optimize = results.get("optimize") or {}
    lines += ["", f"## The parent's results on the optimize split (score {optimize.get('score')})"]
    for task in optimize.get("tasks", []):
        reward = "" if task.get("reward") is None else f", reward {task['reward']:g}"
        lines.append(f"- {task['task_id']}: {task['status']}{reward}: {task.get('reason') or ''}")
    for key, what in (
        ("failed_task_logs", "Test logs"),
        ("failed_task_transcripts", "The target's transcripts"),
    ):
        items = results.get(key) or []
        if items:
            lines += ["", f"{what} of the failed tasks (their last bytes, redacted):"]
            lines += [
                f"- `.aie_bench_recursive/{item['file']}` ({item['delivered_bytes']} of "
                f"{item['raw_bytes']} bytes)"
                for item in items
            ]
    invalid = contract_input.get("invalid_trials") or []
    if invalid:
        lines += ["", "## Why earlier trials were invalid"]
        for item in invalid:
            why = "; ".join(str(r) for r in item["reasons"]) or item.get("error") or ""
            lines.append(f"- trial {item['trial']} ({item['failure_class']}): {why}")
    lines += ["", "## Feedback from previous trials"]
    if not contract_input["feedback"]:
        lines.append("(none yet)")
    for packet in contract_input["feedback"]:
        lines.append(
            f"- trial {packet['trial']}: {packet['decision']} ({packet.get('failure_class') or 'valid'})"
        )
        optimize = packet.get("optimize") or {}
        for task in optimize.get("tasks", []):
            lines.append(f"  - {task['task_id']}: {task['status']}")
    population = contract_input.get("population")
    if population is not None:  # a population search: a proposal may merge two parents
        lines += [
            "",
            "## Population (valid candidates; you may merge one into your parent)",
            "To build your candidate from your parent and one of these, write its id into",
            "`.aie_bench_recursive/second_parent`: the harness merges the two (three-way,",
            "against their common ancestor) and applies your edits on top.",
        ]
        for member in population:
            passed = ", ".join(member["passed_tasks"]) or "none"
            lines.append(f"- {member['id']}: optimize {member['optimize_score']}; passed: {passed}")
    lines += [
        "",
        "## Mutation boundary",
        "```json",
        json.dumps(contract_input["boundary"], indent=2),
        "```",
    ]
    return "\n".join(lines) + "\n"
