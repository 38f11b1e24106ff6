"""Keep secrets and host paths out of a release.

Every released byte passes through a `Scrubber`: the records layer's redaction
(`metaeval.records.redact`: secret environment values, credential shapes) and then host paths
(the run directory, the task pack, HOME, the working directory, the Python prefix and the
metaeval source tree) replaced by placeholders such as ``$RUN_DIR``. Only whole absolute paths
of two or more components are replaced, however the run directory was named on the command
line (``run`` or ``/home/u/run``): a word such as "run", or ``/tmp`` in a task's text, stays. Parquet files are
rewritten through polars with their string columns scrubbed, since a byte-level replacement
would corrupt them.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import polars as pl

from metaeval.records.redact import redact_text, secret_env_values

PLACEHOLDERS = ("$RUN_DIR", "$PACK_DIR", "$METAEVAL_SRC", "$PYTHON_PREFIX", "$CWD", "$HOME")
# A host path matches only whole: not preceded by a character of a name or path ("/var/tmp"
# keeps its "/tmp", "x/run" its "/run"; "file:///tmp/x" and "//tmp" are scrubbed) and not
# followed by one ("/workspace" is not "/work"; "/work." ending a sentence is, "/work.bak" not)
# (ASCII classes: binary files are scrubbed through latin-1, where byte 0xff reads as a letter)
_BEFORE = r"(?<![A-Za-z0-9_.~-])"
_AFTER = r"(?![A-Za-z0-9_-]|\.[A-Za-z0-9_-])"


def _is_host_specific(path: str) -> bool:
    """True for an absolute path of two or more components. A top-level folder alone (/tmp,
    /root, /work) names no one's machine, and is common in task text ("write to /tmp/out"):
    replacing it would corrupt that text, so it is left as it is."""
    parts = [p for p in path.split(os.sep) if p]
    return os.path.isabs(path) and len(parts) >= 2


class Scrubber:
    """Scrubs text, bytes and Parquet files; counts what it changed."""

    def __init__(self, run_dir: Path, pack_dir: Path | None):
        import metaeval

        places: list[tuple[str, str]] = []
        for token, path in (
            ("$RUN_DIR", run_dir),
            ("$PACK_DIR", pack_dir),
            ("$METAEVAL_SRC", Path(metaeval.__file__).parent.parent),
            ("$PYTHON_PREFIX", Path(sys.prefix)),
            ("$CWD", Path.cwd()),
            ("$HOME", Path.home()),
        ):
            if path is None:
                continue
            # absolute spellings only: a relative one ("run") is a word in any text
            for variant in {os.path.abspath(path), os.path.realpath(path)}:
                if _is_host_specific(variant):
                    places.append((variant, token))
        # longest first, so /home/u/runs/x becomes $RUN_DIR rather than $HOME/runs/x
        self.paths = sorted(set(places), key=lambda p: (-len(p[0]), p[0]))
        self._tokens = dict(self.paths)
        alternatives = "|".join(re.escape(path) for path, _ in self.paths)
        self._pattern = re.compile(f"{_BEFORE}(?:{alternatives}){_AFTER}") if self.paths else None
        self.changed: dict[str, int] = {}

    def markers(self) -> list[str]:
        """The strings that must never appear in a release (host paths, secret values)."""
        return [p for p, _ in self.paths] + secret_env_values()

    def text(self, text: str) -> str:
        """Redacted text with host paths replaced by placeholders."""
        text = redact_text(text)
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self._tokens[m.group(0)], text)

    def data(self, data: bytes, name: str) -> bytes:
        """Scrubbed bytes: UTF-8 as text, anything else byte-wise through latin-1."""
        try:
            text, encoding = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = data.decode("latin-1"), "latin-1"
        clean = self.text(text)
        if clean == text:
            return data
        self.changed[name] = self.changed.get(name, 0) + 1
        return clean.encode(encoding)

    def parquet(self, data: bytes, name: str) -> bytes:
        """A Parquet file with every string column scrubbed (unchanged bytes if clean)."""
        df = pl.read_parquet(io.BytesIO(data))
        fixes = {}
        for column, dtype in df.schema.items():
            if dtype != pl.String:
                continue
            values = df.get_column(column).drop_nulls().unique().to_list()
            mapping = {v: self.text(v) for v in values if self.text(v) != v}
            if mapping:
                fixes[column] = pl.col(column).replace(mapping)
        if not fixes:
            return data
        self.changed[name] = self.changed.get(name, 0) + 1
        buf = io.BytesIO()
        df.with_columns(**fixes).write_parquet(buf)
        return buf.getvalue()

    def file(self, data: bytes, name: str) -> bytes:
        """Scrub a file's bytes by its kind."""
        if name.endswith(".parquet"):
            return self.parquet(data, name)
        return self.data(data, name)
