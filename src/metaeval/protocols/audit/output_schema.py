"""What a model must answer in an audit: the output size limits and the JSON schema of findings.

The limits keep a small model from rambling under constrained decoding; they are generation
limits, not validation rules (a longer title from a frontier model is kept). Three of them are
the run's to choose (`AnswerOptions`: findings per task, evidence items per finding, description
length) and are recorded in the run's manifest; the defaults give the schema and prompt of
earlier runs unchanged. The schema is generated from `AnswerFinding` (the part of a
`findings.Finding` a model writes) and post-processed into the plain form every provider's
structured-output mode accepts; it is the schema earlier runs sent, key for key.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metaeval.protocols.audit.findings import (
    CATEGORIES,
    PAPER_SUBCATEGORIES,
    FindingType,
    Severity,
)

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


class AnswerEvidence(BaseModel):
    """A citation as a model writes it: every key present, the lines null when unknown."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(max_length=MAX_PATH_CHARS)
    line_start: int | None = Field(ge=1)
    line_end: int | None = Field(ge=1)
    snippet: str = Field(max_length=MAX_SNIPPET_CHARS)


class AnswerFinding(BaseModel):
    """The part of a `Finding` a model writes (task, source and protocol are the harness's),
    with the generation limits. Its JSON schema, post-processed by `_provider_schema`, is
    the one the providers get; the field order is the order a constrained decoder writes."""

    model_config = ConfigDict(extra="forbid")

    # the paper's 4 categories and 14 subcategories (never the checks' extensions)
    category: str = Field(json_schema_extra={"enum": list(CATEGORIES)})
    subcategory: str = Field(json_schema_extra={"enum": list(PAPER_SUBCATEGORIES)})
    severity: Severity
    finding_type: FindingType
    title: str = Field(max_length=MAX_TITLE_CHARS)
    description: str = Field(max_length=MAX_DESCRIPTION_CHARS)  # the run's cap replaces it
    evidence: list[AnswerEvidence] = Field(min_length=0, max_length=MAX_EVIDENCE)
    recommendation: str = Field(max_length=MAX_RECOMMENDATION_CHARS)
    confidence: float = Field(ge=0, le=1)


# the keyword order the schemas sent to providers have always had
_KEY_ORDER = ("type", "enum", "maxLength", "minimum", "maximum", "items", "minItems", "maxItems")


def _provider_schema(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A pydantic schema node as providers accept it: references inlined, titles and
    defaults dropped, `T | None` as ``"type": [T, "null"]``, objects closed."""
    if "$ref" in node:
        return _provider_schema(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in node:  # `int | None`: the non-null branch, with "null" added to its type
        (branch,) = [b for b in node["anyOf"] if b.get("type") != "null"]
        node = {**branch, "type": [branch["type"], "null"]}
    if node.get("type") == "object":
        props = node["properties"]
        return {
            "type": "object",
            "properties": {name: _provider_schema(sub, defs) for name, sub in props.items()},
            "required": list(node.get("required", [])),
            "additionalProperties": False,
        }
    out = {key: node[key] for key in _KEY_ORDER if key in node}
    if "items" in out:
        out["items"] = _provider_schema(out["items"], defs)
    return out


@functools.cache
def finding_answer_schema() -> dict[str, Any]:
    """One finding's schema at the default caps, generated from `AnswerFinding`."""
    raw = AnswerFinding.model_json_schema()
    return _provider_schema(raw, raw.get("$defs", {}))


@functools.cache
def findings_schema(answer: AnswerOptions = DEFAULT_ANSWER) -> dict[str, Any]:
    """The contract: a JSON array of findings (constrained decoders get exactly this), with
    the run's caps. Shared per `answer`: read it, never change it."""
    finding = copy.deepcopy(finding_answer_schema())
    props = finding["properties"]
    props["description"]["maxLength"] = answer.max_description
    props["evidence"]["maxItems"] = answer.max_evidence
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
EVIDENCE_SCHEMA = FINDING_SCHEMA["properties"]["evidence"]["items"]
FINDINGS_OBJECT_SCHEMA = findings_object_schema(DEFAULT_ANSWER)
