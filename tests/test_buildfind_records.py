"""Build-and-find record models (`buildfind/records.py`): records written by the code before the
models existed read back through them and are written again byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from metaeval.protocols.buildfind.records import (
    BUILDS,
    FINDS,
    BuildRecord,
    FailedCell,
    FindRecord,
    failed_cell,
    parse_record,
)
from metaeval.records.jsonl import dumps_line

OLD = Path(__file__).parent / "fixtures" / "old_format" / "buildfind" / "release" / "records"


@pytest.mark.parametrize("kind", [BUILDS, FINDS])
def test_records_written_by_the_old_code_round_trip_byte_for_byte(kind):
    lines = (OLD / f"{kind}.jsonl").read_bytes().splitlines(keepends=True)
    assert lines, "fixture has records"
    for line in lines:
        record = parse_record(kind, json.loads(line))
        assert isinstance(record, BuildRecord if kind == BUILDS else FindRecord)
        assert dumps_line(record.as_record()) == line


def test_an_int_cost_stays_an_int_and_a_float_a_float():
    line = (OLD / "builds.jsonl").read_bytes().splitlines()[0]
    data = json.loads(line)
    data["cost_usd"], data["wall_clock_seconds"] = 3, 1.5
    out = parse_record(BUILDS, data).as_record()
    assert json.dumps(out["cost_usd"]) == "3" and json.dumps(out["wall_clock_seconds"]) == "1.5"


def test_failed_cell_has_the_old_shape():
    key = {"slice": "formal", "task": "t", "builder": "b", "build_trial": 0, "finder": "f",
           "find_trial": 1}  # fmt: skip
    record = failed_cell(key, 2, True, "boom")
    # the dict the runner wrote before the models: key, recovery, status, infra_error, error
    assert record == {**key, "recovery": 2, "status": "error", "infra_error": True, "error": "boom"}
    old = {**key, "recovery": 2, "status": "error", "infra_error": True, "error": "boom"}
    assert dumps_line(record) == dumps_line(old)  # written with sorted keys
    assert isinstance(parse_record(FINDS, record), FailedCell)
    build_key = {"task": "t", "builder": "b", "build_trial": 0}
    assert failed_cell(build_key, 0, False, "x") == {
        **build_key, "recovery": 0, "status": "error", "infra_error": False, "error": "x"
    }  # fmt: skip


def test_a_misspelt_or_missing_field_is_refused():
    data = json.loads((OLD / "finds.jsonl").read_bytes().splitlines()[0])
    renamed = dict(data)
    renamed["answer_status"] = renamed.pop("answers_status")
    with pytest.raises(ValidationError, match="answer_status"):
        parse_record(FINDS, renamed)
    missing = {k: v for k, v in data.items() if k != "answers"}
    with pytest.raises(ValidationError, match="answers"):
        parse_record(FINDS, missing)
