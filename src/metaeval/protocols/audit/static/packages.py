"""Python package knowledge: distribution -> import names, dependencies, image contents.

The first source is the metadata of the distributions installed next to metaeval
(`importlib.metadata`: `packages_distributions()` reads each wheel's top_level.txt, else its
RECORD; `requires()` its Requires-Dist, extras left out). Where a distribution is not installed
here, `package_knowledge.json` (beside this module; its `provenance` field says where it comes
from) answers. A distribution neither knows is *unresolved*: its import name is guessed from its
spelling, but what it pulls in is unknown, so a check that relies on it is `assumed`.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from functools import cache
from pathlib import Path

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_KNOWLEDGE = json.loads((Path(__file__).with_name("package_knowledge.json")).read_text("utf-8"))

# Distributions whose import name differs from the distribution name.
DIST_TO_IMPORTS: dict[str, tuple[str, ...]] = {
    k: tuple(v) for k, v in _KNOWLEDGE["import_names"].items()
}
# Dependencies a distribution always brings along (so importing them is fine).
TRANSITIVE: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _KNOWLEDGE["requires"].items()}
# Images that are known to ship Python packages beyond the standard library.
IMAGE_PACKAGES: dict[str, tuple[str, ...]] = {
    k: tuple(v) for k, v in _KNOWLEDGE["image_packages"].items()
}
# Base images whose Python packages are just pip/setuptools (or none): a third-party import
# not installed on top of them is surely missing.
PLAIN_IMAGES = re.compile(
    r"^(?:docker\.io/)?(?:library/)?(?:"
    + "|".join(re.escape(name) for name in _KNOWLEDGE["plain_images"])
    + r")(?:[:@]|$)"
)
ALWAYS_IMPORTABLE = frozenset(_KNOWLEDGE["always_importable"])


def normalize_dist(name: str) -> str:
    """A distribution name in its PEP 503 normal form."""
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
                imports.setdefault(normalize_dist(dist_name), set()).add(top.lower())
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
                needed.append(normalize_dist(match.group(1)))
        requires[normalize_dist(name)] = tuple(needed)
    return {k: frozenset(v) for k, v in imports.items()}, requires


def installed_imports(dist: str) -> frozenset[str]:
    return installed()[0].get(normalize_dist(dist), frozenset())


def installed_requires(dist: str) -> tuple[str, ...] | None:
    """The distributions `dist` requires, or None when it is not installed here."""
    return installed()[1].get(normalize_dist(dist))


# Distributions the table names as what others pull in: known to it as well.
_TABLE_LEAVES = frozenset(normalize_dist(d) for deps in TRANSITIVE.values() for d in deps)


def dist_is_resolved(dist: str) -> bool:
    """True when what `dist` provides and pulls in is known (installed metadata or the table)."""
    dist = normalize_dist(dist)
    return (
        installed_requires(dist) is not None
        or dist in TRANSITIVE
        or dist in DIST_TO_IMPORTS
        or dist in _TABLE_LEAVES
    )


def import_names(dist: str, depth: int = 0) -> set[str]:
    """Lower-cased import names a distribution (and what it always pulls in) provides:
    from installed metadata (`installed`), the table, and its spelling
    (`rcsb-api` -> `rcsbapi`, `mailman3` -> `mailman`)."""
    dist = normalize_dist(dist)
    names = {n.lower() for n in DIST_TO_IMPORTS.get(dist, ())} | set(installed_imports(dist))
    base = dist.replace("-", "_")
    names.add(base)
    names.add(base.replace("_", ""))
    if re.search(r"[a-z]\d+$", base):  # a major version in the name: mailman3, jinja2-like
        names.add(re.sub(r"\d+$", "", base))
    for prefix in ("python_", "py"):
        if base.startswith(prefix) and len(base) > len(prefix) + 1:
            names.add(base[len(prefix) :])
    for suffix in ("_python", "_py", "_binary", "_headless", "_cpu", "_gpu", "_lite"):
        if base.endswith(suffix):
            names.add(base[: -len(suffix)])
    if "-" in dist:
        names.add(dist.split("-", 1)[0])
        if not dist.startswith("types-") and not dist_is_resolved(dist):
            names.add(dist.rsplit("-", 1)[1].replace("-", "_"))  # openai-whisper -> whisper
    if depth < 3:
        required = installed_requires(dist)
        for dep in TRANSITIVE.get(dist, ()) if required is None else required:
            names |= import_names(dep, depth + 1)
    return names
