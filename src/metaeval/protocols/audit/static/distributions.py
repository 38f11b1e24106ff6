"""Distribution -> import names and dependencies, read from real package metadata.

The first source is the metadata of the distributions installed next to metaeval
(`importlib.metadata`: `packages_distributions()` reads each wheel's top_level.txt, else its
RECORD; `requires()` its Requires-Dist, extras left out). Where a distribution is not installed
here, `context.DIST_TO_IMPORTS` / `context.TRANSITIVE` (kept by hand from the packages' own
metadata) answer. A distribution neither knows is *unresolved*: its import name is guessed
from its spelling, but what it pulls in is unknown, so a check that relies on it is `assumed`.
"""

from __future__ import annotations

import importlib.metadata
import re
from functools import cache

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def installed() -> tuple[dict[str, frozenset[str]], dict[str, tuple[str, ...]]]:
    """(import names by distribution, required distributions by distribution) of this
    interpreter's installed distributions; names normalised (PEP 503), imports lower-cased."""
    imports: dict[str, set[str]] = {}
    try:
        for top, dists in importlib.metadata.packages_distributions().items():
            if top.startswith("_") or not top.isidentifier():
                continue
            for dist_name in dists:
                imports.setdefault(_norm(dist_name), set()).add(top.lower())
    except Exception:  # noqa: BLE001 - broken metadata of one package must not stop the audit
        return {}, {}
    requires: dict[str, tuple[str, ...]] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if not name:
            continue
        needed = []
        for spec in dist.requires or []:
            if "extra" in spec.partition(";")[2]:
                continue
            match = _REQ.match(spec)
            if match:
                needed.append(_norm(match.group(1)))
        requires[_norm(name)] = tuple(needed)
    return {k: frozenset(v) for k, v in imports.items()}, requires


def installed_imports(dist: str) -> frozenset[str]:
    return installed()[0].get(_norm(dist), frozenset())


def installed_requires(dist: str) -> tuple[str, ...] | None:
    """The distributions `dist` requires, or None when it is not installed here."""
    return installed()[1].get(_norm(dist))
