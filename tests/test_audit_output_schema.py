"""The findings schema the audit prompt sends is generated from `AnswerFinding`, and is the
schema earlier runs sent, key for key and in the same order."""

from __future__ import annotations

import json
import typing

from metaeval.protocols.audit.findings import (
    CATEGORIES,
    PAPER_SUBCATEGORIES,
    Finding,
)
from metaeval.protocols.audit.output_schema import (
    AnswerEvidence,
    AnswerFinding,
    AnswerOptions,
    findings_object_schema,
    findings_schema,
)

# What `findings_schema()` sent before it was generated (spelled out by hand then), as the
# providers received it: the same text byte for byte keeps constrained decoding and the
# prompt hashes of earlier runs unchanged.
SENT_BEFORE = (
    '{"type": "array", "items": {"type": "object", "properties": {"category": {"type": '
    '"string", "enum": ["GT", "EVAL", "INST", "ENV"]}, "subcategory": {"type": "string", '
    '"enum": ["GT-LOGIC", "GT-DATA", "GT-FMT", "EVAL-JUDGE-BIAS", "EVAL-MISMATCH", '
    '"EVAL-COVERAGE", "EVAL-TOLERANCE", "EVAL-STOCHASTIC", "INST-INCOMPLETE", '
    '"INST-CONTRADICT", "INST-INFEASIBLE", "ENV-DEP", "ENV-PATH", "ENV-RESOURCE"]}, '
    '"severity": {"type": "string", "enum": ["Critical", "High", "Medium", "Low"]}, '
    '"finding_type": {"type": "string", "enum": ["Bug", "Warning"]}, "title": {"type": '
    '"string", "maxLength": 120}, "description": {"type": "string", "maxLength": 600}, '
    '"evidence": {"type": "array", "items": {"type": "object", "properties": {"file": '
    '{"type": "string", "maxLength": 200}, "line_start": {"type": ["integer", "null"], '
    '"minimum": 1}, "line_end": {"type": ["integer", "null"], "minimum": 1}, "snippet": '
    '{"type": "string", "maxLength": 300}}, "required": ["file", "line_start", "line_end", '
    '"snippet"], "additionalProperties": false}, "minItems": 0, "maxItems": 3}, '
    '"recommendation": {"type": "string", "maxLength": 400}, "confidence": {"type": '
    '"number", "minimum": 0, "maximum": 1}}, "required": ["category", "subcategory", '
    '"severity", "finding_type", "title", "description", "evidence", "recommendation", '
    '"confidence"], "additionalProperties": false}, "minItems": 0, "maxItems": 8}'
)


def test_the_generated_schema_is_the_one_sent_before() -> None:
    assert json.dumps(findings_schema()) == SENT_BEFORE
    wrapped = findings_object_schema()
    assert wrapped["required"] == ["findings"] and wrapped["additionalProperties"] is False
    assert wrapped["properties"]["findings"] == findings_schema()


def test_the_run_caps_replace_the_defaults_only_where_they_apply() -> None:
    schema = findings_schema(AnswerOptions(max_findings=2, max_evidence=5, max_description=90))
    item = schema["items"]["properties"]
    assert schema["maxItems"] == 2
    assert item["evidence"]["maxItems"] == 5
    assert item["description"]["maxLength"] == 90
    assert item["title"]["maxLength"] == 120  # not a run option
    assert findings_schema()["items"]["properties"]["description"]["maxLength"] == 600


def test_required_fields_and_enums_follow_the_models() -> None:
    item = findings_schema()["items"]
    props = item["properties"]
    # every field of the answer is required, in the model's order, and is a Finding field
    assert item["required"] == list(AnswerFinding.model_fields) == list(props)
    assert set(AnswerFinding.model_fields) <= set(Finding.model_fields)
    evidence = props["evidence"]["items"]
    assert evidence["required"] == list(AnswerEvidence.model_fields)
    # the enums are the Finding's own types and the paper's taxonomy
    severity = typing.get_args(Finding.model_fields["severity"].annotation)
    kind = typing.get_args(Finding.model_fields["finding_type"].annotation)
    assert props["severity"]["enum"] == list(severity) == ["Critical", "High", "Medium", "Low"]
    assert props["finding_type"]["enum"] == list(kind) == ["Bug", "Warning"]
    assert props["category"]["enum"] == list(CATEGORIES)
    assert props["subcategory"]["enum"] == list(PAPER_SUBCATEGORIES)
    assert "GT-NO-ORACLE" not in props["subcategory"]["enum"]  # the checks' extension only


def test_an_answer_the_schema_admits_is_a_finding() -> None:
    answer = AnswerFinding.model_validate(
        {
            "category": "ENV",
            "subcategory": "ENV-PATH",
            "severity": "High",
            "finding_type": "Bug",
            "title": "t",
            "description": "d",
            "evidence": [{"file": "solve.sh", "line_start": 2, "line_end": None, "snippet": ""}],
            "recommendation": "",
            "confidence": 0.7,
        }
    )
    finding = Finding(task_id="a", source="m", protocol="definition", **answer.model_dump())
    assert finding.evidence[0].line_start == 2 and finding.category == "ENV"
