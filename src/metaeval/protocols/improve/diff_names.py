"""File names in a patch, read the way git's `find_name` reads them.

C-style quoted names ("a/with space", octal escapes) are unquoted, `-pN` components are
stripped, and an unquoted name stops at a tab (or a carriage return) as in git.
"""

from __future__ import annotations

import re

MAX_NAME_CHARS = 4096  # PATH_MAX: a longer name is no file git could write (and bounds our work)

_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(text: str) -> tuple[str | None, str]:
    """Unquote a C-style quoted name at the start of `text`; return (name, rest after it)."""
    assert text.startswith('"')
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", "surrogateescape"), text[i + 1 :]
        if ch == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            octal = text[i + 1 : i + 4]
            if re.fullmatch(r"[0-3][0-7][0-7]", octal):
                out.append(int(octal, 8))
                i += 4
                continue
            return None, text
        out += ch.encode("utf-8", "surrogateescape")
        i += 1
    return None, text


def strip_components(name: str, count: int) -> str | None:
    for _ in range(count):
        k = name.find("/")
        if k < 0:
            return None
        name = name[k + 1 :]
    return name or None


def read_name(text: str, *, strip: int, stop_at_tab: bool) -> str | None:
    """A file name as git's find_name reads it (quoted or not), `strip` components removed."""
    if text.startswith('"'):
        name, _rest = unquote(text)
        if name is None:
            return None
    else:
        end = len(text)
        for stop in ("\r", "\t") if stop_at_tab else ("\r",):
            k = text.find(stop)
            if k >= 0:
                end = min(end, k)
        name = text[:end]
    return strip_components(name, strip)


def is_dev_null(text: str) -> bool:
    return text == "/dev/null" or (text.startswith("/dev/null") and text[9:10] in ("\t", " ", "\r"))
