"""Validate a built artifact: compile probe, structural metadata, and a leakage scan."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from metaeval.sandbox.workspace import Workspace
from metaeval.tasks.safe_files import read_regular, walk_tree

LANGUAGES = {
    ".py": "python",
    ".rs": "rust",
    ".go": "go",
    ".js": "javascript",
    ".ts": "typescript",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".rb": "ruby",
    ".sh": "shell",
}
CONFIG_NAMES = {
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Cargo.toml",
    "package.json",
    "go.mod",
    "Makefile",
}
BUILD_OUTPUTS = {"__pycache__", "target", "node_modules", ".venv", "build", "dist", ".git"}
MIN_OPTION_CHARS = 20


MAX_SCANNED_BYTES = 16 * 1024 * 1024
"""A larger artifact file is listed but not read (lines of code, leakage scan)."""


def _source_files(root: Path) -> list[Path]:
    """The artifact's regular files (and symlinks to files inside it), build outputs left out.

    The builder agent wrote the artifact: a symlink it made leading out of the artifact is
    not followed, and FIFOs, sockets and devices are not listed (`safe_files.walk_tree`)."""
    entries = [
        entry
        for entry in walk_tree(root)
        if entry.kind in ("file", "link") and not (set(entry.rel.split("/")) & BUILD_OUTPUTS)
    ]
    # in path order, part by part, as before (the file list is recorded)
    return [entry.path for entry in sorted(entries, key=lambda e: e.rel.split("/"))]


def _read(path: Path, root: Path) -> bytes | None:
    """A listed file's bytes, None when it is refused or too large to scan."""
    try:
        return read_regular(path, root, max_bytes=MAX_SCANNED_BYTES)
    except OSError:
        return None


def structure(root: Path) -> dict[str, Any]:
    """Files, source lines of code by language, and README/tests/config presence."""
    files = _source_files(root)
    loc: Counter[str] = Counter()
    for path in files:
        language = LANGUAGES.get(path.suffix)
        data = _read(path, root) if language else None
        if language and data is not None:
            text = data.decode("utf-8", errors="replace")
            loc[language] += sum(1 for line in text.splitlines() if line.strip())
    rel = [p.relative_to(root).as_posix() for p in files]
    return {
        "files": len(rel),
        "file_list": rel,
        "loc_by_language": dict(sorted(loc.items())),
        "has_readme": any(Path(r).name.lower().startswith("readme") for r in rel),
        "has_tests": any("test" in Path(r).name.lower() or r.startswith("tests/") for r in rel),
        "has_config": any(Path(r).name in CONFIG_NAMES for r in rel),
    }


def wrote_nothing(artifact: Path, file_list: list[str], starter: Path | None) -> bool:
    """The builder left no file of its own: the artifact is empty, or holds exactly the
    starter tree's files with their starter content."""
    if not file_list:
        return True
    if starter is None:
        return False
    for rel in file_list:
        theirs = starter / rel
        if not theirs.is_file() or _read(theirs, starter) != _read(artifact / rel, artifact):
            return False
    return True


def compile_probe(workspace: Workspace, command: str, timeout_s: float = 300) -> dict[str, Any]:
    """Run the task's compile probe in the sandbox; the outcome never changes the build status."""
    result = workspace.exec(command, timeout_s=timeout_s)
    log = (result.stdout + result.stderr)[-4000:]
    return {
        "command": command,
        "compile_pass": result.returncode == 0 and not result.timed_out,
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "log_tail": log,
        "sandboxed": result.sandboxed,
    }


def leakage_scan(root: Path, pack_task: Any) -> dict[str, list[str]]:
    """Direct answer leakage anywhere in the artifact a finder reads (paper App. H): question
    ids, gold keys next to an id, copied option or question wording.

    The whole artifact is scanned: every file the finder's clone holds (build outputs are
    stripped from both), its path included (a file named after a question leaks as much as
    its text), bytes read as UTF-8 with undecodable bytes replaced, so a file with one stray
    byte is scanned rather than skipped. A file that cannot be read (too large, or a link
    leading out of the artifact) is named in `unscanned`."""
    texts, unscanned = [], []
    for path in _source_files(root):
        rel = path.relative_to(root).as_posix()
        data = _read(path, root)
        if data is None:
            unscanned.append(rel)
        texts += [rel, data.decode("utf-8", errors="replace") if data is not None else ""]
    corpus = "\n".join(texts)
    folded = " ".join(corpus.lower().split())
    ids, phrases, gold_keys, questions = [], [], [], []
    for question in pack_task.questions:
        if re.search(rf"(?<![\w-]){re.escape(question.id)}(?![\w-])", corpus):
            ids.append(question.id)
        for key, option in sorted(question.options.items()):
            if _copied(option, folded):
                phrases.append(f"{question.id}:{key}")
        if _copied(question.question, folded):
            questions.append(question.id)
        gold_pattern = rf"{re.escape(question.id)}\W{{0,5}}(gold|answer)\W{{0,5}}{question.gold}\b"
        if re.search(gold_pattern, corpus, flags=re.IGNORECASE):
            gold_keys.append(question.id)
    return {
        "question_ids": ids,
        "option_phrases": phrases,
        "gold_keys": gold_keys,
        "question_texts": questions,
        "unscanned": unscanned,
    }


def _copied(text: str, folded: str) -> bool:
    """`text` (case and whitespace folded, long enough to be more than a common phrase)
    appears in the folded corpus."""
    norm = " ".join(text.lower().split())
    return len(norm) >= MIN_OPTION_CHARS and norm in folded
