"""The end of an audit run: its records read once, summary.json, report.md and report.html.

`warm_up_reports` readies the report renderer while the run waits on its last model calls
(the engine's call pacing calls it once every call is out), so writing the reports at the
end costs no import or template compilation.
"""

from __future__ import annotations

import contextlib
from typing import Any

from metaeval.protocols.audit.summary import read_records, summarize_run
from metaeval.records import RunDir


def finish_run(
    run: RunDir, audit: Any, min_tier: str | None, *, reused: int, ran: int
) -> dict[str, Any]:
    """Write the run's summary (with how many cells were reused and run) and its reports;
    return the summary. `audit` is the `AuditRun` (its skipped directories are listed)."""
    records = read_records(run, min_tier)  # once, for summary and reports
    summary = summarize_run(run, audit, records)
    summary["skipped_completed"] = reused
    summary["ran"] = ran
    run.write_summary(summary)
    from metaeval.protocols.audit.render import write_reports

    write_reports(run, records=records)
    return summary


def warm_up_reports() -> None:
    """Import and compile the report renderer ahead of the end of the run (best effort:
    a failure here surfaces, with its real cause, when the reports are written)."""
    with contextlib.suppress(Exception):
        from metaeval.protocols.audit.report import warm_up

        warm_up()
