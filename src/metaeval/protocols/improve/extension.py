"""Extending an experiment's trial budget as a recorded continuation of the same contract.

A resume whose budget is larger than the bundle's, with every other input unchanged (files,
suites, seed, models, sandbox, meta-agent limits), runs the missing trials in an evidence layer
of its own, `budget-<n>`, and appends `{from, to, layer, at}` to `contract_extensions.json`.
The trials already in the ledger keep their numbers and records; the loop continues from the
active parent. A smaller budget, or a larger one with anything else changed, is refused as a
changed contract. After an extension, a resume without `--budget` continues with the extended
budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaeval.errors import RecordIntegrityError
from metaeval.records.layers import layer_changes, recorded_layers
from metaeval.records.manifest import MANIFEST_NAME, hash_inputs, read_manifest, utc_now

EXTENSIONS = "contract_extensions.json"
BUDGET_HASH = "contract:trial_budget"


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordIntegrityError(f"{path}: cannot be read ({exc})") from None


def extensions(bundle: Path) -> list[dict[str, Any]]:
    """The bundle's recorded budget extensions, oldest first ([] when none)."""
    path = Path(bundle) / EXTENSIONS
    if not path.is_file():
        return []
    data = _read(path)
    if not isinstance(data, list) or not all(
        isinstance(e, dict) and isinstance(e.get("to"), int) for e in data
    ):
        raise RecordIntegrityError(f"{path}: not a list of budget extensions")
    return data


def bundle_budget(bundle: Path) -> int | None:
    """The trial budget the bundle runs under: its resolved manifest's, or the last
    extension's; None for a directory that holds no bundle yet."""
    path = Path(bundle) / "resolved_manifest.json"
    if not path.is_file():
        return None
    recorded = _read(path).get("trial_budget")
    extended = extensions(bundle)
    return extended[-1]["to"] if extended else recorded


def extended_budget(bundle: Path) -> int | None:
    """The extended budget a resume without `--budget` continues with (None: not extended)."""
    extended = extensions(bundle) if Path(bundle).is_dir() else []
    return extended[-1]["to"] if extended else None


def extension_layer(bundle: Path, budget: int, hashes: dict[str, str]) -> str | None:
    """The evidence layer a resume with `budget` writes when it extends the bundle's budget;
    None when it does not extend it. RecordIntegrityError, naming each change, when any input
    but the budget differs from the bundle's current layer."""
    before = bundle_budget(bundle)
    if before is None or budget <= before or not (Path(bundle) / MANIFEST_NAME).is_file():
        return None
    manifest = read_manifest(bundle)
    layers = recorded_layers(Path(bundle), manifest)
    current = layers[-1]
    digests = hash_inputs(hashes)
    if BUDGET_HASH in current["hashes"]:
        digests[BUDGET_HASH] = current["hashes"][BUDGET_HASH]
    changes = layer_changes(current, layers[0], manifest, digests, {})
    if changes:
        raise RecordIntegrityError(
            f"{bundle}: extending the trial budget {before} -> {budget} continues the same "
            "contract, so nothing else may change, but: "
            + "; ".join(changes)
            + "; use a new output directory (-o)"
        )
    return f"budget-{budget}"


def extension_record(bundle: Path, budget: int, layer: str) -> str:
    """`contract_extensions.json` with this extension appended (unchanged when a resume of
    the extension finds it recorded already)."""
    recorded = extensions(bundle)
    if not any(e.get("layer") == layer for e in recorded):
        before = bundle_budget(bundle)
        recorded.append({"from": before, "to": budget, "layer": layer, "at": utc_now()})
    return json.dumps(recorded, indent=2) + "\n"
