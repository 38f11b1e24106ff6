"""Can the tests tell the reference solution's outputs from none? Rerun them without them.

In the oracle's trial (`OutputRemoval`, hooks of `metaeval.tasks.trial.run_trial`), the room's
working directory (/app) is listed before the solve step and after it, with the files whose
status changed since the solve step began (`find -newerct`). Once the tests have passed,
every regular file the oracle created there is removed, with the files the first test run
created there (its own leftovers), and `tests/test.sh` runs once more in the same room. The
image's own files are never touched: a file the oracle changed or deleted stays as it is.

What the second run means (`outputs_finding`):

- the tests fail: they tell a solution from none (no finding);
- they still pass, and the oracle changed nothing else that can be seen (no file of the
  image changed or deleted, nothing written outside the working directory): every effect of
  the reference solution is gone and the tests still pass, EVAL-COVERAGE High;
- they still pass, the oracle also changed other things, and the instruction names a removed
  file: the tests never check that deliverable, EVAL-COVERAGE Medium;
- otherwise the tests may check what the oracle changed elsewhere: recorded, no finding.

Nothing is removed, and that is recorded, when the oracle created no file there, when the
room's `find` cannot compare status times (BusyBox), or when the working directory is `/`.
"""

from __future__ import annotations

import posixpath
import shlex

from metaeval.protocols.audit.execution_results import PhaseOutcome
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.reward import read_reward
from metaeval.tasks.trial import TEST_COMMAND, Room, TrialHooks, TrialResult

REMOVED_LOG = "logs/oracle_outputs_removed.log"
LIST_TIMEOUT_S = 120.0
REMOVE_BATCH = 200  # file names per rm command
SHOWN_FILES = 5
_PRUNED = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/logs", "/tests", "/solution")


class OutputRemoval(TrialHooks):
    """Hooks of the oracle's trial that rerun its tests without the oracle's outputs; the
    second run ends up in `outcome` (its `note` says why it did not run)."""

    def __init__(self) -> None:
        self.outcome = PhaseOutcome(name="outputs_removed", log_name=REMOVED_LOG)
        self.workdir = ""
        self.started = ""  # the room's clock when the solve step began (seconds.nanoseconds)
        self.before: set[str] = set()
        self.after: set[str] = set()
        self.touched: set[str] = set()  # files whose status changed during the solve step
        self.elsewhere: list[str] = []  # files written outside the working directory
        self.failed = ""  # why the listings cannot be trusted

    @property
    def created(self) -> list[str]:
        """Files whose status changed during the solve step and that were not there before
        it: never a file of the image, even one the listing before missed."""
        return sorted(self.touched - self.before)

    @property
    def changed(self) -> list[str]:
        return sorted(self.touched & self.before)

    @property
    def deleted(self) -> list[str]:
        return sorted(self.before - self.after)

    def before_solve(self, room: Room) -> None:
        found = _run(room, "pwd && date +%s.%N && find . -xdev -type f -print")
        lines = found.stdout.splitlines() if _complete(found) else []
        if len(lines) < 2 or not lines[1].replace(".", "", 1).isdigit():
            self.failed = "the room's working directory could not be listed"
            return
        self.workdir, self.started = lines[0].strip(), lines[1].strip()
        self.before = set(lines[2:])

    def after_solve(self, room: Room) -> None:
        if self.failed or not self.started:
            return
        stamp = shlex.quote("@" + self.started)
        touched = _run(room, f"find . -xdev -type f -newerct {stamp} -print")
        listed = _run(room, "find . -xdev -type f -print")
        if not (_complete(touched) and _complete(listed)):
            self.failed = (
                "the room's find cannot compare status times (-newerct), or the working "
                "directory holds too many files to list"
            )
            return
        self.touched = set(touched.stdout.splitlines())
        self.after = set(listed.stdout.splitlines())
        pruned = " -o ".join(f"-path {shlex.quote(p)}" for p in (*_PRUNED, self.workdir))
        outside = _run(
            room,
            f"find / -xdev \\( {pruned} \\) -prune -o -type f -newerct {stamp} -print "
            "2>/dev/null | head -n 20",
        )
        self.elsewhere = outside.stdout.splitlines()
        if outside.timed_out or outside.returncode is None:  # not searched: not "nothing"
            self.elsewhere.append("? (the search outside the working directory did not finish)")

    def after_test(self, room: Room, result: TrialResult) -> None:
        outcome = self.outcome
        if not result.passed:
            outcome.note = "not run: the oracle did not pass its tests"
            return
        if self.failed or not self.started:
            outcome.note = f"not run: {self.failed or 'the solve step was not watched'}"
            return
        if self.workdir in ("", "/"):
            outcome.note = "not run: the working directory is /, whose files are the image's"
            return
        if not self.created:
            outcome.note = f"not run: the oracle created no file under {self.workdir}" + (
                f" (it changed {len(self.changed)} of the image's files)" if self.changed else ""
            )
            return
        leftovers = _run(room, "find . -xdev -type f -print")
        listed = set(leftovers.stdout.splitlines()) if _complete(leftovers) else set()
        first_test = listed - self.after
        removed = [*self.created, *sorted(first_test - self.before)]
        for start in range(0, len(removed), REMOVE_BATCH):
            batch = " ".join(shlex.quote(p) for p in removed[start : start + REMOVE_BATCH])
            _run(room, f"rm -f -- {batch}")
        test = room.test()
        reward, source, error = read_reward(room.verifier_logs)
        if test.limit_exceeded is not None:
            reward, source, error = None, None, f"the tests {test.limit_exceeded}"
        header = f"removed from {self.workdir}: {', '.join(self.shown(self.created))}"
        tail = (
            f"reward: {reward:g} (from /logs/verifier/{source})"
            if reward is not None
            else f"reward: none ({error})"
        )
        outcome.ran = True
        outcome.reward, outcome.reward_source, outcome.reward_error = reward, source, error
        outcome.test = test
        outcome.log = "\n".join([header, test.describe(TEST_COMMAND), tail]) + "\n"

    def absolute(self, paths: list[str]) -> list[str]:
        return [posixpath.normpath(posixpath.join(self.workdir, p)) for p in paths]

    def other_changes(self) -> list[str]:
        """What else the oracle did that removing its files does not undo."""
        return [
            *(f"changed {p}" for p in self.absolute(self.changed)),
            *(f"deleted {p}" for p in self.absolute(self.deleted)),
            *(f"wrote {p}" for p in self.elsewhere),
        ]

    def shown(self, paths: list[str]) -> list[str]:
        """Up to SHOWN_FILES paths as absolute paths of the room, and how many more."""
        full = self.absolute(paths)
        more = len(full) - SHOWN_FILES
        return full[:SHOWN_FILES] + ([f"{more} more"] if more > 0 else [])


def _complete(result: ExecResult) -> bool:
    """The command succeeded and its whole output is there (a cut listing is no listing)."""
    return result.ok and not result.stdout_truncated


def _run(room: Room, command: str) -> ExecResult:
    return room.exec(command, "agent", timeout_s=LIST_TIMEOUT_S)
