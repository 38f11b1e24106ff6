"""Progress for a loop of long steps: a bar with time remaining on a terminal, one plain line
per finished step otherwise (so a log file shows what happened while it happens), and a
heartbeat line while a step runs longer than the heartbeat interval (`METAEVAL_HEARTBEAT_S`,
30 s by default; see `metaeval.engine.executor`)."""

from __future__ import annotations

import threading
import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from metaeval.console import SafeConsole
from metaeval.safe_text import printable


class StepProgress:
    """``with StepProgress("trials", total) as p: ... p.advance("trial 001 promoted")``."""

    def __init__(
        self,
        description: str,
        total: int,
        console: Console | None = None,
        heartbeat_s: float | None = None,
    ):
        self.console = console or SafeConsole(stderr=True)
        self.description = description
        self.total = total
        self.done = 0
        self.heartbeat_s = heartbeat_s
        self._step_started = time.monotonic()
        self._stop = threading.Event()
        self.bar: Progress | None = None
        if self.console.is_terminal:
            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[last]}"),
                console=self.console,
            )
            self.task = self.bar.add_task(description, total=total, last="")

    def __enter__(self) -> StepProgress:
        self._step_started = time.monotonic()
        if self.bar is not None:
            self.bar.start()
        else:
            threading.Thread(target=self._heartbeat, name="step-heartbeat", daemon=True).start()
        return self

    def _heartbeat(self) -> None:
        """While the loop runs: a line for the step under way whenever it has run another
        heartbeat interval."""
        from metaeval.engine.executor import heartbeat_interval

        interval = self.heartbeat_s or heartbeat_interval()
        while not self._stop.wait(interval):
            elapsed = time.monotonic() - self._step_started
            if elapsed >= interval and self.done < self.total:
                step = f"{self.description} {self.done + 1}/{self.total}"
                write_line(self.console, f"{step}: still running, {elapsed:.1f}s")

    def advance(self, what: str) -> None:
        """One step finished; `what` says which and how it ended."""
        self.done += 1
        self._step_started = time.monotonic()
        if self.bar is not None:
            self.bar.update(self.task, advance=1, last=what)
        else:
            write_line(self.console, f"{self.description} {self.done}/{self.total}: {what}")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self.bar is not None:
            self.bar.stop()


def write_line(console: Console, line: str) -> None:
    """Write one plain progress line to the console's file.

    Control characters (an escape sequence in a hostile task name) are written as their
    escapes (`safe_text.printable`), so a log never carries a live terminal control sequence.
    Plain text needs none of Rich's rendering, which costs a third of a millisecond a line.
    """
    console.file.write(printable(line) + "\n")
    console.file.flush()
