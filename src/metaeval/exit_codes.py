"""Exit codes of every `metaeval` command, the same across the three protocols (the table is
in the README, "Exit codes"), and the console lines of a run whose cells did not all end ok."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

OK = 0  # done; every cell of a run ended ok
NEGATIVE = 1  # the command's answer is no (a rejected patch, a release that does not
# reproduce, a pack with problems); also an unexpected error
BAD_INPUT = 2  # bad input or an operator fault; records written so far are intact
CELLS_FAILED = 3  # a run finished, but some cells failed, timed out or hit infra errors

REASON_CHARS = 300
SETUP_REFUSAL = re.compile(
    r"\b(?:401|403|404|407)\b|model_not_found|NotFoundError|AuthenticationError|"
    r"PermissionDeniedError"
)
"""A failure reason that says the provider refused the run's setup (`transient.SETUP_STATUS`):
rerunning the same command cannot help until the setup is fixed."""


@dataclass(frozen=True)
class CellFailure:
    """One cell that did not end ok: `kind` (infra error, failed, timed out), a one-line
    `reason`, and whether rerunning the same command retries it."""

    kind: str
    reason: str
    retried: bool


def one_line(text: object) -> str:
    """The useful line of an error text: a traceback's last line, else the first; capped."""
    lines = str(text or "").strip().splitlines()
    line = (lines[-1] if lines[0].startswith("Traceback") else lines[0]) if lines else ""
    line = line.strip()
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def failure_lines(failures: Iterable[CellFailure]) -> list[str]:
    """'infra errors: 3 × REASON' per kind and reason (most frequent first), then a hint on
    what rerunning does; no lines when nothing failed."""
    groups = Counter(failures)
    if not groups:
        return []
    ordered = sorted(
        groups.items(), key=lambda g: (not g[0].retried, -g[1], g[0].kind, g[0].reason)
    )
    lines = [f"{f.kind}: {n} × {f.reason}" + ("" if f.retried else " (final)") for f, n in ordered]
    retried = sum(n for f, n in groups.items() if f.retried)
    final = sum(n for f, n in groups.items() if not f.retried)
    hint = []
    setup = sum(n for f, n in groups.items() if f.retried and SETUP_REFUSAL.search(f.reason))
    if setup:
        hint.append(
            f"the provider refused {setup} cell(s) for the run's setup (a model name it does "
            "not know, a key or a permission): fix it, e.g. the --model name, and run again; "
            "a model left out of the next run keeps its failed cells as they are, and they "
            "no longer count"
        )
    if retried - setup:
        hint.append(
            f"run the same command again to resume: it retries the {retried - setup} cell(s) "
            "with infrastructure errors (fix the cause first, e.g. start the model endpoint)"
        )
    if final:
        hint.append(
            f"the {final} final cell(s) are kept on a rerun; redo them in a new "
            "evidence layer (--new-layer NAME) or a new output directory (-o)"
        )
    lines.append("hint: " + "; ".join(hint))
    return lines


def report_failures(console: Console, failures: Iterable[CellFailure]) -> int:
    """Print `failure_lines` and return the run's exit code: CELLS_FAILED when any cell did
    not end ok, else OK."""
    lines = failure_lines(failures)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return CELLS_FAILED if lines else OK
