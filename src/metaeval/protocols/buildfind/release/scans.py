"""`verify-release`: the artifact checks recorded with each build, recomputed.

* The leakage scan (`validation.leakage_scan`) runs again on each released artifact with the
  released pack's questions and must give what the build record holds. A record made before
  a key of the scan existed is compared on the keys it has.
* The relaxed compile probe's outcome (`relaxed_probe`) of each build in `data/builds` must be
  the one its build record holds (Table 10 is recomputed from `data/builds` with the other
  tables). The probe itself is not run again: that would execute the artifact's code.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from metaeval.protocols.buildfind.records import BUILD_KEY, BUILDS, BuildRecord, final_builds

BUILDS_DATA = "data/builds.parquet"


def check_artifact_scans(root: Path) -> list[str]:
    """Every difference between the recorded artifact checks and the released artifacts."""
    from metaeval.protocols.buildfind.artifact.validation import leakage_scan
    from metaeval.protocols.buildfind.pack.load import load_pack
    from metaeval.protocols.buildfind.record_files import RecordFiles

    builds = final_builds(RecordFiles(root / "records").read(BUILDS))
    pack = load_pack(root / "pack") if (root / "pack").is_dir() else None
    problems: list[str] = []
    for key, record in sorted(builds.items()):
        if not isinstance(record, BuildRecord) or not record.leakage:
            continue
        where = f"records/{BUILDS}.jsonl: build {dict(zip(BUILD_KEY, key, strict=True))}"
        artifact = (root / record.artifact).resolve()
        if not artifact.is_relative_to(root.resolve() / "artifacts") or not artifact.is_dir():
            problems.append(f"{where}: artifact {record.artifact} is not in the release")
            continue
        if pack is None or record.task not in pack.tasks:
            problems.append(f"{where}: task {record.task} is not in the released pack")
            continue
        again = leakage_scan(artifact, pack.tasks[record.task])
        for name, value in sorted(record.leakage.items()):
            if again.get(name) != value:
                problems.append(
                    f"{where}: leakage {name} recorded {value!r}, the released artifact "
                    f"gives {again.get(name)!r}"
                )
    return problems + _relaxed_outcomes(root, builds)


def _relaxed_outcomes(root: Path, builds: dict) -> list[str]:
    """`data/builds`' relaxed_probe column against the build records (when it has one)."""
    path = root / BUILDS_DATA
    if not path.is_file():
        return []
    data = pl.read_parquet(path)
    if "relaxed_probe" not in data.columns:
        return []  # released before the relaxed probe existed
    problems = []
    for row in data.iter_rows(named=True):
        key = (row["task"], row["builder"], row["build_trial"])
        record = builds.get(key)
        relaxed = (
            record.validation.get("relaxed_probe") if isinstance(record, BuildRecord) else None
        )
        recorded = relaxed.get("outcome") if isinstance(relaxed, dict) else None
        if row["relaxed_probe"] != recorded:
            problems.append(
                f"{BUILDS_DATA}: build {key}: relaxed_probe {row['relaxed_probe']!r}, the build "
                f"record holds {recorded!r}"
            )
    return problems
