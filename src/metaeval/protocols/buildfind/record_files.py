"""Read a run's record files without opening the run (no lock, no session entry).

`release/write` reads the run it packages this way, so releasing a run never changes it, and
`verify-release` reads the released ``records/`` the same way. Only the latest evidence layer
is read, as `RunDir.read` does for an open run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from metaeval.records import iter_jsonl, read_manifest

log = logging.getLogger(__name__)


class RecordReader(Protocol):
    """What the record tables read from: an open RunDir, or RecordFiles over a folder."""

    def read(self, name: str) -> list[dict]: ...


class RecordFiles:
    """The manifest and the current layer's records of a run (or released records) folder."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.manifest: dict[str, Any] = read_manifest(self.path)
        listed = self.manifest.get("layers")
        # a released manifest is input from anyone: entries that are not layers are ignored
        layers = (
            [dict(e) for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
        )
        layers += [
            e
            for e in iter_jsonl(self.path / "layers.jsonl", lambda p: log.warning("%s", p))
            if isinstance(e.get("name"), str)
        ]
        names = [e["name"] for e in layers if isinstance(e.get("name"), str)]
        self.base_layer = names[0] if names else "base"
        self.layer = names[-1] if names else "base"

    def read(self, name: str) -> list[dict]:
        """Records of ``<name>.jsonl`` in the current layer, in file order."""
        return [
            rec
            for rec in iter_jsonl(self.path / f"{name}.jsonl", lambda p: log.warning("%s", p))
            if rec.get("layer", self.base_layer) == self.layer
        ]
