"""`verify-release`: every build and find record's seed, and every find's option order, follow
from the run's seed0 under the rule its manifest recorded (`seeds.run_seed_rule`; a release of
a run started before the rule was recorded is checked under the cell-hash rule it used)."""

from __future__ import annotations

from pathlib import Path

from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    FIND_KEY,
    FINDS,
    VIEW_FIND_KEY,
    VIEW_FINDS,
    BuildRecord,
    FindRecord,
    parse_record,
)
from metaeval.protocols.buildfind.seeds import build_seed, find_seed, permutation, run_seed_rule


def check_seeds(root: Path) -> list[str]:
    """Each record whose seed or option order is not the one the rule derives, named."""
    from metaeval.protocols.buildfind.record_files import RecordFiles

    records = RecordFiles(root / "records")
    manifest_seeds = records.manifest.get("seeds")
    rule = run_seed_rule(manifest_seeds)
    seed0 = manifest_seeds.get("seed0") if isinstance(manifest_seeds, dict) else None
    if not isinstance(seed0, int):
        seed0 = records.manifest.get("config", {}).get("seed0")
    if not isinstance(seed0, int):
        return ["records/manifest.json: no integer seed0 to check the seeds against"]
    problems = []
    for kind, fields in ((BUILDS, BUILD_KEY), (FINDS, FIND_KEY), (VIEW_FINDS, VIEW_FIND_KEY)):
        for line, data in enumerate(records.read(kind), start=1):
            record = parse_record(kind, data)
            key = {f: getattr(record, f, None) for f in fields}
            where = f"records/{kind}.jsonl record {line}"
            if isinstance(record, BuildRecord):
                want = build_seed(seed0, key, record.recovery, rule)
            elif isinstance(record, FindRecord):
                want = find_seed(seed0, key, rule)
                wrong = sorted(
                    q for q, order in record.permutation.items() if order != permutation(want, q)
                )
                if wrong:
                    problems.append(
                        f"{where}: option order of {', '.join(wrong)} is not the one seed "
                        f"{want} gives"
                    )
            else:
                continue
            if record.seed != want:
                problems.append(f"{where}: seed {record.seed}, the {rule} rule gives {want}")
    return problems
