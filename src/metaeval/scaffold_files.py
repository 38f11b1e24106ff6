"""Writing a scaffold (`audit init`, `buildfind init`): a set of text files into a new
directory, never over anything a user already has."""

from __future__ import annotations

from pathlib import Path

from metaeval.errors import ConfigError


def write_files(dest: Path, files: dict[str, str]) -> list[Path]:
    """Write `files` (relative path -> text) under `dest`, which must be absent or an empty
    directory; shell scripts are made executable. Returns the written paths."""
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise ConfigError("exists and is not an empty directory; choose a new one", file=str(dest))
    written = []
    for rel, text in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written
