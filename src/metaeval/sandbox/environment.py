"""The one interface every place an agent works offers: `Environment`.

A bubblewrap workspace (`metaeval.sandbox.workspace.Workspace`), a Harbor task's root
(`metaeval.tasks.task_workspace.TaskRootWorkspace`) and the agent phase of a trial room,
bubblewrap or container (`metaeval.tasks.trial.Room.agent_env`), all implement it, so a caller
never asks which one it holds: what differs between them is a method of each.

Errors, the same for every implementation:

- `PathEscapeError`: a path that leads outside the environment (`..`, another absolute path,
  a symlink on the way out);
- `ReadOnlyWorkspaceError`: a write to an environment that takes none;
- `WorkspaceError` (the base of both): any other path or operation refused, e.g. a directory
  where a file was named, a file that is not a regular file or is too large to read;
- `OSError`: the write or read itself failed (disk full, the engine gone).

A command that fails, times out or cannot start is not an error: `exec` returns its
`ExecResult` (returncode None and the reason on stderr when it never ran).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from metaeval.errors import MetaevalError
from metaeval.sandbox.file_views import FileHead, GrepHits
from metaeval.sandbox.process import ExecResult

MAX_READ_BYTES = 4 * 1024 * 1024
"""What `read_file` returns at most (a larger file is a `WorkspaceError`)."""


class WorkspaceError(MetaevalError):
    """A workspace cannot be created, or a path or operation on it is not allowed."""


class PathEscapeError(WorkspaceError):
    """A path that leads outside its workspace (via '..', an absolute path or a symlink)."""


class ReadOnlyWorkspaceError(WorkspaceError):
    """A write to a read-only workspace."""


@runtime_checkable
class Environment(Protocol):
    """Where one agent run reads, writes and executes."""

    def exec(
        self,
        command: str,
        *,
        timeout_s: float = 60,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run `command` with bash in the environment's working directory, within
        `timeout_s`, with the variables `env` set for this command only; everything it
        started is gone when it returns."""
        ...

    def read_file(self, path: str) -> bytes:
        """The bytes of the regular file `path` (relative to the working directory, or
        absolute as the environment's own commands see it), at most MAX_READ_BYTES."""
        ...

    def write_file(self, path: str, data: bytes) -> str:
        """Write `data` to `path` (as `read_file` names it), creating its directories, and
        return the path as the environment's commands see it."""
        ...

    def list_files(self) -> list[str]:
        """Sorted paths, relative to the working directory, of every entry under it that is
        not a directory (links listed, never followed)."""
        ...

    def list_dir(self, path: str) -> list[str]:
        """The entries of directory `path`, a directory with a trailing '/'
        (`metaeval.sandbox.file_views`)."""
        ...

    def grep(self, pattern: str, path: str, max_hits: int) -> GrepHits:
        """At most `max_hits` lines matching `pattern` in the files under `path`."""
        ...

    def read_head(self, path: str, max_bytes: int) -> FileHead:
        """At most `max_bytes` of the file `path`, and whether it goes on."""
        ...

    def close(self) -> None:
        """Release what the environment holds (its files stay for the caller to read)."""
        ...
