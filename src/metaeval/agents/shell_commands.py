"""What a shell command an agent ran does, for the observation layer (`metaeval.agents.effort`).

Shell command classification (codex and mini-swe-agent read files through the shell, so their
tool calls are classified by the command, not by the tool name):

* a command containing mini-swe-agent's submit marker (``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
  or ``MINI_SWE_AGENT_FINAL_OUTPUT``) is ``submit``;
* ``bash -lc '<script>'`` / ``sh -c '<script>'`` wrappers are unwrapped first, and leading
  ``cd DIR &&`` steps and ``VAR=value`` assignments are skipped;
* a command that redirects output into a file (``>`` / ``>>``, but not ``>/dev/null`` or
  ``2>&1``), or runs ``sed -i``, ``tee``, ``touch``, ``mkdir``, ``rm``, ``mv``, ``cp`` or
  ``apply_patch``, is ``write``;
* otherwise the first word decides: ``cat head tail nl less more ls tree wc stat file`` and
  ``sed -n`` are ``read``; ``grep egrep fgrep rg ag ack find fd locate`` and ``git grep`` are
  ``search``; anything else is ``exec``.

A read-ish shell command on exactly one file (``cat F``, ``cat -n F``, ``nl -ba F``,
``head [-n N] F``, ``sed -n 'A,Bp' F``, optionally piped into ``sed -n 'A,Bp'`` or ``head``)
that succeeded gets a `Span`, with ``nl``/``cat -n`` prefixes stripped, so overlapping reads
of one file are counted once by the observation layer.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

from metaeval.agents.types import Span, ToolKind

SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
READ_COMMANDS = frozenset(
    {"cat", "head", "tail", "nl", "less", "more", "ls", "tree", "wc", "stat", "file"}
)
SEARCH_COMMANDS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate"})
WRITE_COMMANDS = frozenset({"tee", "touch", "mkdir", "rm", "mv", "cp", "apply_patch"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
CONTROL_TOKENS = frozenset({"&&", "||", ";", "|", "&", ";;"})


def _tokens(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes
        return None


def unwrap_shell(command: str | Sequence[str]) -> str:
    """The script of a ``bash -lc '<script>'`` style command; other commands unchanged."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return command
    else:
        argv = list(command)
    if (
        len(argv) == 3
        and os.path.basename(argv[0]) in SHELLS
        and argv[1].startswith("-")
        and "c" in argv[1]
    ):
        return argv[2]
    if isinstance(command, str):
        return command
    return shlex.join(argv)


REDIRECT_TOKENS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", ">>&"})


def _has_file_redirect(tokens: list[str]) -> bool:
    """True when the command sends output into a file (not /dev/null, not another descriptor)."""
    for i, tok in enumerate(tokens):
        if tok not in REDIRECT_TOKENS:
            continue
        target = tokens[i + 1] if i + 1 < len(tokens) else ""
        if target in ("/dev/null", "-") or target.isdigit() or target.startswith("&"):
            continue
        return True
    return False


def _first_command(tokens: list[str]) -> list[str]:
    """Words of the first simple command, skipping ``cd DIR &&`` steps and VAR=value prefixes."""
    words: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in CONTROL_TOKENS or tok in ("(", ")", "{", "}"):
            if words and words[0] == "cd" and tok in ("&&", ";"):
                words = []
                i += 1
                continue
            if words:
                break
            i += 1
            continue
        if not words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tok):
            i += 1
            continue
        words.append(tok)
        i += 1
    return words


def classify_shell_command(command: str | Sequence[str]) -> ToolKind:
    """Tool kind of a shell command (see the module docstring for the rule)."""
    script = unwrap_shell(command)
    if any(marker in script for marker in SUBMIT_MARKERS):
        return "submit"
    tokens = _tokens(script)
    if tokens is None:  # unbalanced quotes: fall back to plain words
        tokens = script.split()
    if _has_file_redirect(tokens):
        return "write"
    words = _first_command(tokens)
    if not words:
        return "exec"
    name = os.path.basename(words[0])
    if name in WRITE_COMMANDS:
        return "write"
    if name == "sed":
        if any(w.startswith("-i") or w == "--in-place" for w in words[1:]):
            return "write"
        return "read" if "-n" in words[1:] else "exec"
    if name in READ_COMMANDS:
        return "read"
    if name in SEARCH_COMMANDS:
        return "search"
    if name == "git" and len(words) > 1 and words[1] == "grep":
        return "search"
    return "exec"


# ---------------------------------------------------------------------------------------------
# Line-numbered file output

LINE_NUMBER_PREFIX = re.compile(r"^\s*(\d+)(?:\t|\u2192)")


def strip_line_numbers(text: str) -> tuple[int, str] | None:
    """Strip ``cat -n`` / ``nl -ba`` style prefixes ("     1\\t...", "1\\t...", "1→...").

    Returns (first line number, raw text) when every line up to the end (or up to the first
    unnumbered line, e.g. a harness reminder appended after the file) carries a prefix and the
    numbers are consecutive; otherwise None. The raw text joins the stripped lines with "\\n",
    so a numbered empty last line (the file's final newline) restores the trailing newline.
    """
    pieces = text.split("\n")
    if pieces and pieces[-1] == "":
        pieces.pop()
        had_trailing_newline = True
    else:
        had_trailing_newline = False
    stripped: list[str] = []
    first: int | None = None
    expected = None
    complete = True
    for piece in pieces:
        match = LINE_NUMBER_PREFIX.match(piece)
        if match is None:
            complete = False
            break
        number = int(match.group(1))
        if expected is not None and number != expected:
            return None
        if first is None:
            first = number
        expected = number + 1
        stripped.append(piece[match.end() :])
    if first is None:
        return None
    body = "\n".join(stripped)
    if had_trailing_newline and complete:
        body += "\n"
    elif not complete:
        body += "\n"  # the file's lines ended where the appended text began
    return first, body


def _sed_range(words: list[str]) -> int | None:
    """Start line of ``sed -n 'A,Bp'`` / ``sed -n 'Ap'``; None if not that form."""
    if len(words) < 3 or words[0] != "sed" or words[1] != "-n":
        return None
    match = re.fullmatch(r"(\d+)(?:,(\d+|\$))?p", words[2])
    return int(match.group(1)) if match else None


def _head_ok(words: list[str]) -> bool:
    rest = words[1:]
    if not rest:
        return True
    if rest[0] == "-n" and len(rest) == 2 and rest[1].isdigit():
        return True
    return len(rest) == 1 and re.fullmatch(r"-\d+|-n\d+|--lines=\d+", rest[0]) is not None


def _reader(words: list[str]) -> tuple[str, int, bool] | None:
    """(path, start line, numbered) of a single-file reader command, else None."""
    if not words:
        return None
    name = words[0]
    args = words[1:]
    if name == "cat":
        if len(args) == 1 and not args[0].startswith("-"):
            return args[0], 1, False
        if len(args) == 2 and args[0] == "-n":
            return args[1], 1, True
        return None
    if name == "nl":
        if len(args) == 2 and args[0] == "-ba":
            return args[1], 1, True
        if len(args) == 3 and args[0] == "-b" and args[1] == "a":
            return args[2], 1, True
        return None
    if name == "head":
        if args and not args[-1].startswith("-") and _head_ok(["head", *args[:-1]]):
            return args[-1], 1, False
        return None
    if name == "sed":
        start = _sed_range(words[:3])
        if start is not None and len(words) == 4:
            return words[3], start, False
    return None


def shell_read_span(command: str | Sequence[str], output: str) -> tuple[Span, str] | None:
    """Span and raw text of a successful single-file read command's output, else None."""
    if not output:
        return None
    script = unwrap_shell(command)
    tokens = _tokens(script)
    if tokens is None or any(t in CONTROL_TOKENS - {"|"} for t in tokens):
        return None
    if any(t.startswith(("<", ">")) or "$(" in t or "`" in t for t in tokens):
        return None
    stages: list[list[str]] = [[]]
    for tok in tokens:
        if tok == "|":
            stages.append([])
        else:
            stages[-1].append(tok)
    reader = _reader(stages[0])
    if reader is None:
        return None
    path, start, numbered = reader
    for stage in stages[1:]:
        sed_start = _sed_range(stage)
        if sed_start is not None and len(stage) == 3:
            if not numbered:
                start = start + sed_start - 1
            continue
        if stage and stage[0] == "head" and _head_ok(stage):
            continue
        return None
    if numbered:
        stripped = strip_line_numbers(output)
        if stripped is None:
            return None
        start, text = stripped
        return Span(path=path, start_line=start), text
    return Span(path=path, start_line=start), output
