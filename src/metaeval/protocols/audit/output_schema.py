"""What a model must answer in an audit: the output size limits and the JSON schema of findings.

The limits keep a small model from rambling under constrained decoding; they are generation
limits, not validation rules (a longer title from a frontier model is kept). Three of them are
the run's to choose (`AnswerOptions`: findings per task, evidence items per finding, description
length) and are recorded in the run's manifest; the defaults give the schema and prompt of
earlier runs unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Any

from metaeval.protocols.audit.findings import CATEGORIES, PAPER_SUBCATEGORIES, SEVERITY_ORDER

MAX_FINDINGS = 8
MAX_EVIDENCE = 3
MAX_TITLE_CHARS = 120
MAX_DESCRIPTION_CHARS = 600
MAX_RECOMMENDATION_CHARS = 400
MAX_SNIPPET_CHARS = 300
MAX_PATH_CHARS = 200


@dataclass(frozen=True)
class AnswerOptions:
    """What a run asks of each model answer: the caps (in the prompt and the schema), and
    whether the model writes its analysis out before the JSON (`reasoning`; no output schema
    is sent then, since constrained decoding admits nothing but the JSON)."""

    max_findings: int = MAX_FINDINGS
    max_evidence: int = MAX_EVIDENCE
    max_description: int = MAX_DESCRIPTION_CHARS
    reasoning: bool = False

    def settings(self) -> dict[str, int | bool]:
        return asdict(self)


DEFAULT_ANSWER = AnswerOptions()


def _string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


EVIDENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file": _string(MAX_PATH_CHARS),
        "line_start": {"type": ["integer", "null"], "minimum": 1},
        "line_end": {"type": ["integer", "null"], "minimum": 1},
        "snippet": _string(MAX_SNIPPET_CHARS),
    },
    "required": ["file", "line_start", "line_end", "snippet"],
    "additionalProperties": False,
}


@functools.cache
def findings_schema(answer: AnswerOptions = DEFAULT_ANSWER) -> dict[str, Any]:
    """The contract: a JSON array of findings (constrained decoders get exactly this). Shared
    per `answer`: read it, never change it."""
    finding: dict[str, Any] = {
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "subcategory": {"type": "string", "enum": list(PAPER_SUBCATEGORIES)},
            "severity": {"type": "string", "enum": list(SEVERITY_ORDER)},
            "finding_type": {"type": "string", "enum": ["Bug", "Warning"]},
            "title": _string(MAX_TITLE_CHARS),
            "description": _string(answer.max_description),
            "evidence": {
                "type": "array",
                "items": EVIDENCE_SCHEMA,
                "minItems": 0,
                "maxItems": answer.max_evidence,
            },
            "recommendation": _string(MAX_RECOMMENDATION_CHARS),
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": [
            "category",
            "subcategory",
            "severity",
            "finding_type",
            "title",
            "description",
            "evidence",
            "recommendation",
            "confidence",
        ],
        "additionalProperties": False,
    }
    return {"type": "array", "items": finding, "minItems": 0, "maxItems": answer.max_findings}


@functools.cache
def findings_object_schema(answer: AnswerOptions = DEFAULT_ANSWER) -> dict[str, Any]:
    """The same array wrapped in an object, for providers whose structured-output mode needs
    an object at the root. The parser accepts both shapes."""
    return {
        "type": "object",
        "properties": {"findings": findings_schema(answer)},
        "required": ["findings"],
        "additionalProperties": False,
    }


FINDINGS_SCHEMA = findings_schema(DEFAULT_ANSWER)
FINDING_SCHEMA = FINDINGS_SCHEMA["items"]
FINDINGS_OBJECT_SCHEMA = findings_object_schema(DEFAULT_ANSWER)
