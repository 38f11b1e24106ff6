"""Find the examples shipped with metaeval (wheel data or a source checkout)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from metaeval.errors import ConfigError


def example_path(name: str) -> Path:
    """Path of examples/<name>, from the installed package or the source tree."""
    candidates = [
        Path(str(resources.files("metaeval"))) / "_examples" / name,
        Path(__file__).resolve().parents[2] / "examples" / name,
    ]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise ConfigError("example not found", file=str(candidates[-1]))


def example_audit_bench() -> Path:
    """The example audit benchmark (Harbor tasks with seeded defects and a gold file)."""
    return example_path("audit-bench")
