"""The optimize and held-out views of one experiment must not share a task (issue 40).

A suite's own `suite.json` keeps its splits disjoint, but an optimize suite config without a
`split_id` takes every task of the suite, held-out ones included; the meta-agent would then
see feedback on the tasks that are meant to validate it. `check_disjoint` refuses that.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from metaeval.errors import ConfigError


def check_disjoint(
    optimize: Sequence[Path], held_out: Sequence[Path] | None, manifest: Path
) -> None:
    """ConfigError naming the manifest and `evaluation.optimize.split_id` when a task is in
    both views (tasks compared by their resolved directories)."""
    if not held_out:
        return
    held = {Path(task).resolve() for task in held_out}
    shared = [Path(task).name for task in optimize if Path(task).resolve() in held]
    if not shared:
        return
    listed = ", ".join(shared[:10]) + (
        f" (and {len(shared) - 10} more)" if len(shared) > 10 else ""
    )
    raise ConfigError(
        f"the optimize and held-out views share {len(shared)} task(s): {listed}; the meta-agent "
        "would see feedback on held-out tasks. Give the optimize suite a split_id (or task_ids) "
        "that leaves the held-out tasks out",
        file=str(manifest),
        field="evaluation.optimize.split_id",
    )
