"""`audit score` asks for its judge (no silent small local model) and will not replace a score
made by another judge unless told to."""

from __future__ import annotations

from pathlib import Path

from test_view import BENCH, cli


def test_score_needs_a_judge_and_keeps_another_judges_score(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = cli("audit", "run", str(BENCH), "--static-only", "-o", str(run), "--task", "row-count")
    assert done.returncode == 0, done.stderr
    gold = str(BENCH / "gold.json")
    missing = cli("audit", "score", str(run), "--gold", gold)
    assert missing.returncode == 2 and "--judge" in missing.stderr
    assert "smollm2" not in missing.stdout + missing.stderr
    assert not (run / "score.json").exists()

    first = cli("audit", "score", str(run), "--gold", gold, "--judge", "category")
    assert first.returncode == 0, first.stderr
    kept = (run / "score.json").read_bytes()
    other = cli("audit", "score", str(run), "--gold", gold, "--judge", "scripted/x")
    assert other.returncode == 2
    assert f"{run / 'score.json'}: field 'judge'" in other.stderr
    assert "'category'" in other.stderr and "--replace" in other.stderr
    assert (run / "score.json").read_bytes() == kept  # untouched
    again = cli("audit", "score", str(run), "--gold", gold, "--judge", "category")
    assert again.returncode == 0 and "replacing the earlier score.json (judge category)" in (
        again.stdout
    )
