"""How an environment shows its files to an agent's file tools: list a directory, search
files, read a file's head (`metaeval.sandbox.environment.Environment.list_dir`, `grep`,
`read_head`).

Two ways, one per kind of environment, behind the same methods:

- `CommandViews`: the environment has no host directory (a trial room's agent phase, a
  container), so the views run `ls` and `grep -E` there (a POSIX extended regular expression)
  and read through its own `read_file`;
- `HostViews`: the working directory is a host directory (a workspace), read here with
  Python's regular expressions. The agent's own commands can create symlinks, FIFOs and huge
  sparse files in it, so these reads go through `metaeval.tasks.safe_files`: a symlink whose
  target leaves the directory is never followed (listed with its link text, not searched, not
  read), FIFOs, sockets and devices are never opened, and no file is read beyond `max_bytes`.

Errors are `MetaevalError` with a message for the agent (a bad pattern, not a directory, no
such file) or the environment's own `WorkspaceError`s.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from metaeval.errors import MetaevalError
from metaeval.sandbox.process import ExecResult, require_started
from metaeval.tasks.safe_files import TreeEntry, classify, read_head, walk_tree

VIEW_TIMEOUT_S = 60.0
MAX_VIEW_BYTES = 16 * 1024 * 1024
"""grep on the host skips a file longer than this."""


@dataclass
class FileHead:
    """The first bytes of a file; `longer` when it goes on; `path` as the environment names
    it (relative to its working directory when it has one)."""

    data: bytes
    longer: bool
    path: str


@dataclass
class GrepHits:
    """`path:line:text` hits, and files not searched, each with why."""

    hits: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


class CommandViews:
    """The views as commands run in the environment (mixed into one with `exec` and
    `read_file`)."""

    def exec(self, command: str, *, timeout_s: float = 60) -> ExecResult:
        raise NotImplementedError

    def read_file(self, path: str) -> bytes:
        raise NotImplementedError

    def list_dir(self, path: str) -> list[str]:
        """`ls -1Ap`: entries, a directory with a trailing '/'."""
        return _lines(self._view(f"ls -1Ap -- {shlex.quote(path)}"))

    def grep(self, pattern: str, path: str, max_hits: int) -> GrepHits:
        where, expression = shlex.quote(path), shlex.quote(pattern)
        command = f"grep -rnIE -m {max_hits} -e {expression} -- {where} | head -n {max_hits}"
        hits = _lines(self._view(f"set -o pipefail; {command}"))
        return GrepHits(hits=[hit.removeprefix("./") for hit in hits])  # as on the host

    def read_head(self, path: str, max_bytes: int) -> FileHead:
        """The file through `read_file` (which refuses one past its own cap), cut at
        `max_bytes`."""
        data = self.read_file(path)
        return FileHead(data[:max_bytes], len(data) > max_bytes, path)

    def _view(self, command: str) -> str:
        result = require_started(self.exec(command, timeout_s=VIEW_TIMEOUT_S))
        if result.returncode not in (0, 1) or (result.returncode == 1 and result.stderr):
            raise MetaevalError((result.stderr or result.stdout).strip()[-300:] or "failed")
        return result.stdout


def _lines(text: str) -> list[str]:
    return text.splitlines()


class HostViews:
    """The views read on the host under `path` (mixed into one with `resolve`, which maps a
    path to the host and refuses one that leaves)."""

    path: Path

    def resolve(self, rel: str | os.PathLike[str]) -> Path:
        raise NotImplementedError

    def list_dir(self, path: str) -> list[str]:
        """Entries sorted by name; a directory (or a link to one inside) with a trailing '/';
        anything else that is not a file described in parentheses (never followed)."""
        root = self.resolve(path)
        if not root.is_dir():
            raise MetaevalError(f"not a directory: {path}")
        lines = []
        with os.scandir(root) as listing:
            for name in sorted(entry.name for entry in listing):
                kind, detail = classify(root / name, self.path)
                if kind in ("dir", "link_dir"):
                    lines.append(name + "/")
                elif kind in ("file", "link"):
                    lines.append(name)
                else:  # never followed or opened: the link text or file type is all that shows
                    entry = TreeEntry(name, root / name, kind, detail)
                    lines.append(f"{name} ({entry.describe()})")
        return lines

    def grep(self, pattern: str, path: str, max_hits: int) -> GrepHits:
        """Python regular expression `pattern` over the text files under `path`."""
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise MetaevalError(f"bad regular expression: {exc}") from exc
        root = self.resolve(path)
        if root.is_dir():
            entries = walk_tree(root, boundary=self.path)
        else:
            kind, detail = classify(root, self.path)
            entries = [TreeEntry(root.name, root, kind, detail)]
        found = GrepHits()
        for entry in entries:
            if len(found.hits) >= max_hits:
                break
            if entry.kind not in ("dir", "link_dir"):
                self._grep_one(entry, compiled, max_hits, found)
        return found

    def _grep_one(
        self, entry: TreeEntry, pattern: re.Pattern[str], cap: int, found: GrepHits
    ) -> None:
        shown = entry.path.relative_to(self.path).as_posix()
        if entry.kind not in ("file", "link"):
            found.left_out.append(f"{shown} ({entry.describe()})")
            return
        try:
            data, longer = read_head(
                entry.path,
                self.path,
                max_bytes=MAX_VIEW_BYTES,
                follow_inside_links=entry.kind == "link",
            )
            text = data.decode("utf-8")
        except (UnicodeDecodeError, OSError):
            return  # binary or unreadable: not searched, as grep -I would
        if longer:
            found.left_out.append(f"{shown} (larger than {MAX_VIEW_BYTES} bytes)")
            return
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                found.hits.append(f"{shown}:{number}:{line}")
                if len(found.hits) >= cap:
                    return

    def read_head(self, path: str, max_bytes: int) -> FileHead:
        """At most `max_bytes` of the regular file `path`, never through a link that leaves."""
        target = self.resolve(path)  # symlinks resolved, refused when they leave
        if not os.path.lexists(target) or target.is_dir():
            raise MetaevalError(f"no such file: {path}")
        try:
            # opened without following a link (the path is resolved), never a FIFO or device
            data, longer = read_head(
                target, self.path, max_bytes=max_bytes, follow_inside_links=False
            )
        except OSError as exc:
            raise MetaevalError(f"cannot read {path}: {exc}") from None
        return FileHead(data, longer, str(target.relative_to(self.path)))
