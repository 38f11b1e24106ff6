"""`metaeval buildfind init DIR`: a one-task pack and a run config to edit into your own.

`DIR/pack/slugify/` holds a small spec (four items), three questions traced to it, and three
reference repositories with the answers a perfect finder gives on each, so the scripted
reference builders and finder run the whole pipeline without a model. `DIR/run.yaml` names
no base finders: every artifact-question pair goes to `labels/review.csv` for a person, which
is how a run whose labels nobody has checked should start. Formats: docs/formats/buildfind.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from metaeval.console import make_console
from metaeval.scaffold_files import write_files

out = make_console(markup=False)

SLUG_DOCUMENTED = '''\
"""slug: turn a title into a URL slug."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str, max_length: int | None = None) -> str:
    """Lowercase `text`, replace every run of characters other than ASCII letters and digits
    with one hyphen and strip hyphens at both ends. Raise ValueError when nothing is left.
    With `max_length`, cut the slug to at most that many characters and strip a hyphen the
    cut leaves at the end."""
    slug = _SEPARATORS.sub("-", text.lower()).strip("-")
    if not slug:
        raise ValueError(f"no letters or digits in {text!r}")
    if max_length is not None:
        slug = slug[:max_length].rstrip("-")
    return slug
'''

SLUG_TERSE = """\
import re

_R = re.compile(r"[^a-z0-9]+")


def slugify(t, max_length=None):
    s = _R.sub("-", t.lower()).strip("-")
    if not s:
        raise ValueError(t)
    if max_length is not None:
        s = s[:max_length].rstrip("-")
    return s
"""

SLUG_DIVERGENT = '''\
"""slug: turn a title into a URL slug."""

import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Lowercase, one hyphen per run of other characters, no hyphens at the ends; a text
    without letters or digits gives the empty string."""
    return _SEPARATORS.sub("-", text.lower()).strip("-")
'''

FILES: dict[str, str] = {
    "README.md": """\
# My build-and-find pack

Made by `metaeval buildfind init`. `pack/slugify/` is one task: `spec.yaml` (what builders
are told, finders never see), `questions.yaml` (what finders answer, each gold answer traced
to spec items), `task.yaml` (language, compile probe, time budgets) and `reference/` (three
scripted reference repositories and what a perfect finder answers on each). `run.yaml` runs
the reference builders and finder; replace them with real agents (commented lines) and the
task with your own. Formats: docs/formats/buildfind.md in metaeval's repository.
""",
    "run.yaml": """\
# A build-and-find run on the pack next to this file (paths are relative to this file).
pack: pack
builders:
  - {name: documented, agent: "reference:documented", effort: low, family: reference}
  - {name: divergent, agent: "reference:divergent", effort: low, family: reference-alt}
  # - {name: claude, agent: claude-code, model: local/smollm2, effort: low, family: anthropic}
finders:
  - {name: ref-finder, agent: reference-finder, effort: low, family: reference}
  # - {name: smollm2, agent: toolloop, model: local/smollm2, effort: low, family: local, max_steps: 3}
r_build: 1
r_find: 1
controls: [question_only, spec_only]
# base_finders: [...]   finders whose agreeing answers label pairs without a person
""",
    "pack/slugify/task.yaml": """\
language: python
compile_probe: python -m compileall -q .
build_time_s: 300
find_time_s: 120
description: >-
  Write a Python module `slug.py` with a function `slugify` that turns a title into a URL
  slug. Standard library only.
""",
    "pack/slugify/spec.yaml": """\
# Hidden specification: builders see it, finders never do. questions.yaml traces to these ids.
items:
  - id: hyphens
    kind: behavior
    text: >-
      `slugify(text)` lowercases the text and replaces every run of characters other than
      ASCII letters and digits with a single hyphen; hyphens at both ends are removed.
  - id: empty
    kind: behavior
    text: >-
      A text with no ASCII letters or digits raises ValueError; slugify never returns an
      empty string.
  - id: max-length
    kind: behavior
    text: >-
      `slugify(text, max_length=N)` cuts the slug to at most N characters and removes a
      hyphen the cut leaves at the end.
  - id: module-layout
    kind: design
    text: One module, `slug.py`, exposing `slugify`; no dependencies.
""",
    "pack/slugify/questions.yaml": """\
# Finders see these questions and the built repository, never the spec.
questions:
  - id: q01
    question: What does slugify("Hello,  World!") return?
    options:
      A: "hello-world"
      B: "hello-world-"
      C: "hello--world-"
      D: "hello_world"
    gold: A
    traces: [hyphens]
  - id: q02
    question: What does slugify do with a text that has no letters or digits, such as "!!!"?
    options:
      A: "Returns an empty string"
      B: "Returns a single hyphen"
      C: "Raises ValueError"
      D: "Returns None"
    gold: C
    traces: [empty]
  - id: q03
    question: What does the max_length argument of slugify do?
    options:
      A: "Raises ValueError when the slug is longer"
      B: "Cuts the slug to at most max_length characters, without a hyphen at the end"
      C: "Pads the slug with hyphens to exactly max_length characters"
      D: "Counts words rather than characters"
    gold: B
    traces: [max-length]
""",
    "pack/slugify/reference/documented/slug.py": SLUG_DOCUMENTED,
    "pack/slugify/reference/documented/README.md": """\
# slug

`slugify(text, max_length=None)` turns a title into a URL slug: lowercase, one hyphen for
every run of other characters, no hyphens at the ends. A text without letters or digits
raises ValueError. `max_length` cuts the slug and drops a hyphen the cut leaves at the end.
""",
    "pack/slugify/reference/terse/slug.py": SLUG_TERSE,
    "pack/slugify/reference/divergent/slug.py": SLUG_DIVERGENT,
    "pack/slugify/reference/expected_answers.yaml": """\
# What a perfect finder answers on each reference repository (null: no option is supported).
# divergent returns "" for "!!!" (A) and has no max_length (null).
documented: {q01: A, q02: C, q03: B}
terse: {q01: A, q02: C, q03: B}
divergent: {q01: A, q02: A, q03: null}
""",
}


def init_cmd(
    dest: Annotated[Path, typer.Argument(help="New directory (absent or empty).")],
) -> None:
    """Write a one-task pack and a run config (reference agents, no model) to edit."""
    write_files(dest, FILES)
    out.print(f"wrote {dest}: run.yaml, pack/slugify (spec, questions, reference repositories)")
    out.print("next:")
    out.print(f"  metaeval buildfind validate {dest / 'pack'}")
    out.print(f"  metaeval buildfind run {dest / 'run.yaml'} -o runs/my-bf")
    out.print(
        "  then fill runs/my-bf/labels/review.csv and run: metaeval buildfind label runs/my-bf"
    )
    out.print("formats: docs/formats/buildfind.md; run.yaml: metaeval schema buildfind-config")
