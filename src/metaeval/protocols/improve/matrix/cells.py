"""The cells of a matrix: one experiment manifest per lane x benchmark x seed.

A cell's manifest is written to `<output>/manifests/<cell id>.json` with every path absolute
and its bundle is `<output>/<cell id>`; it is an ordinary manifest, so `metaeval improve run`
on it alone runs (or resumes) that one cell. The manifest's bytes depend only on the matrix
config, so rewriting it on a resume leaves its hash, and the bundle's contract, unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval.config_files import load
from metaeval.errors import ConfigError
from metaeval.protocols.improve.matrix.config import MatrixBenchmark, MatrixConfig, MatrixLane
from metaeval.records.durable import atomic_write

MANIFESTS = "manifests"


@dataclass(frozen=True)
class Cell:
    """One experiment of the matrix."""

    id: str
    lane: str
    benchmark: str
    seed: int
    manifest: Path  # the cell's generated experiment manifest
    bundle: Path


def load_matrix(path: Path) -> MatrixConfig:
    """The matrix config; ConfigError naming the file and field when it is malformed."""
    if not Path(path).is_file():
        raise ConfigError("matrix config not found", file=str(path))
    return load(path, MatrixConfig)


def _absolute(base: Path, value: Any) -> Any:
    return str((base / value).resolve()) if isinstance(value, str) else value


def _suite_ref(base: Path, ref: dict[str, Any]) -> dict[str, Any]:
    return {**ref, "suite_config": _absolute(base, ref.get("suite_config"))}


def cell_manifest(
    config: MatrixConfig, base: Path, lane: MatrixLane, bench: MatrixBenchmark, seed: int
) -> dict[str, Any]:
    """The experiment manifest of one cell (paths made absolute against `base`)."""
    shared = json.loads(json.dumps(config.experiment))  # a deep copy
    if isinstance(shared.get("baseline"), dict) and "repo" in shared["baseline"]:
        shared["baseline"]["repo"] = _absolute(base, shared["baseline"]["repo"])
    else:
        shared.setdefault("baseline", {})["repo"] = str((base / "target").resolve())
    policy = shared.get("mutation_policy")
    if isinstance(policy, dict) and isinstance(policy.get("boundary"), str):
        policy["boundary"] = _absolute(base, policy["boundary"])
    if lane.target_model is not None:
        shared["sum"] = {**(shared.get("sum") or {}), "model": lane.target_model}
    held = bench.held_out.model_dump(mode="json", exclude_defaults=True)
    if held.get("suite_config"):
        held["suite_config"] = _absolute(base, held["suite_config"])
    return {
        "mode": "recursive_search",
        "description": f"matrix cell: lane {lane.id}, benchmark {bench.id}, seed {seed}",
        **shared,
        "sut": {"sut_config": str((base / lane.sut_config).resolve())},
        "evaluation": {
            "optimize": _suite_ref(base, bench.optimize.model_dump(mode="json")),
            "held_out": held,
        },
        "seed": seed,
    }


def plan_cells(path: Path) -> tuple[MatrixConfig, list[Cell]]:
    """The matrix config and its cells, lanes outermost, then benchmarks, then seeds."""
    config = load_matrix(path)
    base = Path(path).resolve().parent
    output = (base / config.output).resolve()
    cells = []
    for lane in config.lanes:
        for bench in config.benchmarks:
            for seed in config.seeds:
                cell_id = f"{lane.id}--{bench.id}"
                if len(config.seeds) > 1:
                    cell_id += f"--seed-{seed}"
                cells.append(
                    Cell(
                        cell_id,
                        lane.id,
                        bench.id,
                        seed,
                        output / MANIFESTS / f"{cell_id}.json",
                        output / cell_id,
                    )
                )
    return config, cells


def write_cell_manifests(path: Path) -> tuple[MatrixConfig, list[Cell]]:
    """Plan the cells and write each one's manifest (the same bytes on every call)."""
    config, cells = plan_cells(path)
    base = Path(path).resolve().parent
    lanes = {lane.id: lane for lane in config.lanes}
    benches = {bench.id: bench for bench in config.benchmarks}
    for cell in cells:
        data = cell_manifest(config, base, lanes[cell.lane], benches[cell.benchmark], cell.seed)
        data["output"] = str(cell.bundle)
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        cell.manifest.parent.mkdir(parents=True, exist_ok=True)
        if not cell.manifest.is_file() or cell.manifest.read_text(encoding="utf-8") != text:
            atomic_write(cell.manifest, text.encode())
    return config, cells
