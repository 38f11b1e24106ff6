"""The human-readable files of a release: README.md, labels/PROVENANCE.md, LICENSE and
LICENSES.md (what is included, under which licence, and what is not redistributed). Each is
returned as text or bytes; `write` writes them through its scrubber."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from metaeval import __version__

_LICENSE_NAMES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING")


def labels_provenance(rows: pl.DataFrame) -> str:
    """labels/PROVENANCE.md: how many formal (artifact, question) pairs carry which label from
    which source."""
    formal = rows.filter(pl.col("slice") == "formal")
    pairs = formal.select("task", "builder", "build_trial", "question_id", "label", "label_source")
    pairs = pairs.unique(["task", "builder", "build_trial", "question_id"], keep="first")
    counts = pairs.group_by("label_source", "label").len().sort("label_source", "label")
    lines = [
        "# Implementation labels and their provenance",
        "",
        "Each formal (artifact, question) pair carries a label (`label`) and where it came from",
        "(`label_source`): `consensus_prelabel` (stable agreement of the run's base finders,",
        "`prelabels.parquet`), `manual_review` (a person's entry in `review.csv`) or `none`",
        "(not labelled yet). Finder recovery is scored on `implemented_gold` pairs only.",
        "",
        "| label_source | label | pairs |",
        "|---|---|---|",
    ]
    lines += [f"| {s} | {lab} | {n} |" for s, lab, n in counts.iter_rows()]
    lines += [
        "",
        f"{pairs.height} artifact-question pairs in total. `evidence_audit.csv` is the",
        "stratified sample of correct answers for the post-hoc evidence audit (paper App. I),",
        "with each answer's cited files, symbols and rationale and the auditor's label.",
    ]
    return "\n".join(lines) + "\n"


APACHE = "https://www.apache.org/licenses/LICENSE-2.0"


def license_files(manifest: dict[str, Any], pack_dir: Path | None) -> tuple[dict[str, bytes], str]:
    """LICENSE and LICENSES.md by release path, and the licence for the Croissant metadata."""
    files: dict[str, bytes] = {}
    found = None
    if pack_dir is not None:
        found = next((pack_dir / n for n in _LICENSE_NAMES if (pack_dir / n).is_file()), None)
    if found is not None:
        files["LICENSE"] = found.read_bytes()
        pack_license = f"the pack's own licence, copied from its `{found.name}` into `LICENSE`"
        declared = "the task pack's own licence, in LICENSE"
    else:
        files["LICENSE"] = (
            "The task pack of this release ships no licence file of its own. The example packs\n"
            f"distributed with metaeval are under metaeval's licence, Apache-2.0\n({APACHE}).\n"
        ).encode()
        pack_license = "no licence file in the pack; `LICENSE` states the licence that applies"
        declared = APACHE
    config = manifest.get("config", {})
    agents = sorted(
        {
            (a.get("agent"), a.get("model"))
            for a in config.get("builders", []) + config.get("finders", [])
        },
        key=str,
    )
    lines = [
        "# Licences and third-party material",
        "",
        f"- **Task pack** (`pack/`, `prompts/`): {pack_license}.",
        "- **Generated artifacts, records, tables and reports**: produced by the agents and by",
        "  metaeval's deterministic analysis in this run; released under the same licence as",
        "  the pack unless the run's owner states otherwise.",
        f"- **Harness**: metaeval {__version__} (Apache-2.0). Its code is not part of this release;",
        "  `verify-release` needs metaeval installed with the `release` extra.",
        "",
        "## Not redistributed",
        "",
        "- **Model weights**: none are included, whatever model served an agent.",
        "- **Agent CLI code** (Claude Code, Codex, Gemini CLI, mini-swe-agent and others): none is",
        "  included; their names and versions appear in the records only as identifiers.",
        "- **Provider APIs** were accessed as services under their own terms; only the requests'",
        "  and responses' recorded transcripts (secrets redacted) are included.",
        "- **Python packages** metaeval depends on (polars, matplotlib, mlcroissant, ...).",
        "- **Build outputs** of the compile probe (`__pycache__`, `*.pyc`, VCS data): left out of",
        "  `artifacts/`; finders never saw them either.",
        "",
        "## Agents and models of this run (identifiers only)",
        "",
        "| agent | model |",
        "|---|---|",
    ]
    lines += [f"| {a} | {m or '-'} |" for a, m in agents]
    files["LICENSES.md"] = ("\n".join(lines) + "\n").encode("utf-8")
    return files, declared


def readme(manifest: dict[str, Any], rows: pl.DataFrame) -> str:
    """README.md of the release: what is here and how to check it."""
    config = manifest.get("config", {})
    return "\n".join(
        [
            "# Build-and-find release",
            "",
            f"Run of metaeval {__version__}: {len(config.get('builders', []))} builders, "
            f"{len(config.get('finders', []))} finders, {rows.height} question rows.",
            "",
            "Check it: `metaeval buildfind verify-release .` recomputes every table from",
            "`data/question_rows.parquet` (and `data/view_rows.parquet`, `data/builds.parquet`,",
            "the evidence-audit labels and the view records), compares it with `tables/`",
            "(counts exactly, floats to 1e-9), checks `claims.json`, every checksum in",
            "`SHA256SUMS` and the Croissant metadata in `croissant.json`.",
            "",
            "Recompute by hand: `metaeval buildfind analyze --rows data/question_rows.parquet",
            "--view-rows data/view_rows.parquet -o recomputed` (leave out --view-rows when the",
            "run had no restricted views).",
            "",
            "CSV text cells that begin with `=`, `+`, `-`, `@`, a tab or a carriage return (or",
            "with `'`) carry one leading `'`, so a spreadsheet shows them instead of running",
            "them as formulas; the Parquet files hold every value as it is.",
            "",
            "`artifacts/` holds the generated repositories as probed, without build outputs",
            "(`__pycache__`, `*.pyc`, VCS data) and without symbolic links.",
            "",
            "Host paths are replaced by `$RUN_DIR`, `$PACK_DIR`, `$HOME`, `$CWD`,",
            "`$PYTHON_PREFIX` and `$METAEVAL_SRC` (whole absolute paths of two or more",
            "components; a top-level folder such as /tmp alone is left as written); secrets by",
            "`[REDACTED]`.",
            "See LICENSES.md for what is not included.",
            "",
        ]
    )
