"""The base of every protocol's record models: what `RunDir` stamps on a record, and how a
model is written back as the record it was.

`RunDir` writes records with sorted keys and stamps ``created_at`` and ``layer``; a model
dumped with `as_record` (only the fields that were set) therefore writes byte-for-byte what a
plain dict with the same fields wrote. Unknown fields are refused, so a renamed field is an
error where it is written, not a silent ``None`` where it is read.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

Number = int | float  # kept as written: an int is not turned into a float on the way through


class RunRecord(BaseModel):
    """One record of a run directory's JSON-lines files."""

    model_config = ConfigDict(extra="forbid")

    created_at: str | None = None  # set by RunDir when the record is written
    layer: str | None = None  # set by RunDir: the evidence layer the record belongs to

    def as_record(self) -> dict[str, Any]:
        """The record as written: the fields that were set, nothing added."""
        return self.model_dump(mode="json", exclude_unset=True)
