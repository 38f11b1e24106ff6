"""`metaeval improve init DIR`: a minimal improve experiment a user edits into their own.

It writes one manifest and one suite (no SUT config, profile or suite config files: the
manifest holds the SUT inline and every other setting has a documented default, see
docs/formats/improve.md), and materializes the toolloop target as a git repository:

    DIR/manifest.json         the experiment: scripted meta-agent, 2 trials, held-out gate
    DIR/suite/suite.json      the splits: two optimize tasks, one held-out task
    DIR/suite/<task>/         Harbor tasks copied from metaeval's example terminal suite
    DIR/target/               the toolloop target agent, a git repository (the baseline)

`metaeval improve run DIR/manifest.json` then runs as it is; the bundle goes to
`runs/<DIR's name>/` under the current directory. The scripted meta-agent is a stand-in: put a real agent and model in
the manifest's `sut.meta_agent` (or pass `-M`) and your own tasks in `suite/`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError
from metaeval.examples import example_path
from metaeval.protocols.improve.init_target import init_target

OPTIMIZE_TASKS = ("count-error-lines", "csv-column")
HELD_OUT_TASKS = ("checksum-file",)

MANIFEST: dict[str, Any] = {
    "mode": "recursive_search",
    "description": "A minimal improve experiment written by `metaeval improve init`: the "
    "scripted meta-agent edits the toolloop target in target/; promotion needs a strict gain "
    "on the optimize split and no regression on the held-out split.",
    "sut": {"contract": "edit/1", "meta_agent": {"agent": "scripted"}},
    "sum": {"model": "none"},
    "evaluation": {
        "optimize": {"suite_config": "suite", "split_id": "optimize"},
        "held_out": {
            "required": True,
            "suite_config": "suite",
            "split_id": "held_out",
            "selection_gate": "must_not_regress",
        },
    },
    "trial_budget": 2,
}


def init_experiment(dest: Path) -> list[Path]:
    """Write the scaffold into `dest` (new or empty); returns the files a user edits."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError("the directory exists and is not empty", file=str(dest))
    source = example_path("improve-suites/terminal")
    suite = dest / "suite"
    suite.mkdir(parents=True)
    for task in (*OPTIMIZE_TASKS, *HELD_OUT_TASKS):
        shutil.copytree(source / task, suite / task, symlinks=False)
    splits = {"optimize": list(OPTIMIZE_TASKS), "held_out": list(HELD_OUT_TASKS)}
    suite_json = {"name": "my-suite", "description": "Edit me: your tasks.", "splits": splits}
    _write(suite / "suite.json", suite_json)
    _write(dest / "manifest.json", MANIFEST)
    init_target("toolloop", dest / "target")
    return [dest / "manifest.json", suite / "suite.json"]


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
