"""BenchGuard findings: the taxonomy (paper Table 4), severities, confidence tiers, the schema."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

# Table 4: 4 categories, 14 subcategories, with the paper's short definitions.
TAXONOMY: dict[str, dict[str, str]] = {
    "GT": {
        "GT-LOGIC": "Wrong logic or methodology: the gold solution uses an incorrect algorithm, "
        "computes the wrong metric, or applies the logical opposite.",
        "GT-DATA": "Wrong data handling: the gold solution uses the wrong files or columns, drops "
        "data, or covers only part of the scope.",
        "GT-FMT": "Output format mismatch: the gold output format does not match the specification.",
    },
    "EVAL": {
        "EVAL-JUDGE-BIAS": "Judge bias or anchoring: the evaluator penalizes valid, functionally "
        "equivalent alternatives.",
        "EVAL-MISMATCH": "Spec-eval mismatch: the evaluator checks something different from the "
        "specification.",
        "EVAL-COVERAGE": "Incomplete output coverage: the evaluator does not accept all valid "
        "output formats, types or equivalent names.",
        "EVAL-TOLERANCE": "Wrong tolerance: numeric tolerances or thresholds are incorrect.",
        "EVAL-STOCHASTIC": "Unhandled non-determinism: the evaluator assumes deterministic output "
        "where it should not.",
    },
    "INST": {
        "INST-INCOMPLETE": "Underspecified requirements: essential information is missing, so no "
        "unique solution follows.",
        "INST-CONTRADICT": "Cross-artifact misalignment: the instruction conflicts internally or "
        "with the gold solution or evaluator.",
        "INST-INFEASIBLE": "Infeasible as written: the task cannot be solved with the information "
        "provided.",
    },
    "ENV": {
        "ENV-DEP": "Missing or conflicting dependencies: required packages are unavailable or "
        "conflict.",
        "ENV-PATH": "Path configuration errors: hard-coded paths do not match the runtime "
        "environment.",
        "ENV-RESOURCE": "Resource constraints: the task needs network, external services, or "
        "exceeds time limits.",
    },
}
CATEGORIES = tuple(TAXONOMY)
# The paper's 14 subcategories: what the LLM protocol may answer with.
PAPER_SUBCATEGORIES: dict[str, str] = {sub: cat for cat, subs in TAXONOMY.items() for sub in subs}
# Subcategories beyond Table 4 that only the deterministic checks report.
EXTENSIONS: dict[str, dict[str, str]] = {
    "GT": {
        "GT-NO-ORACLE": "No oracle: the task ships no reference solution, so nothing shows it "
        "can be solved (a missing ground truth, not an infeasible task).",
    },
}
SUBCATEGORIES: dict[str, str] = {
    **PAPER_SUBCATEGORIES,
    **{sub: cat for cat, subs in EXTENSIONS.items() for sub in subs},
}

Severity = Literal["Critical", "High", "Medium", "Low"]
SEVERITY_ORDER: dict[str, int] = {"Critical": 0, "High": 1, "Medium": 2, "Low": 3}
FindingType = Literal["Bug", "Warning"]
Protocol = Literal["definition", "execution", "static"]
Tier = Literal["Confirmed", "Likely", "Possible", "Suppressed"]
# How a finding knows (issue 26): seen in a faithful run of the task's own environment,
# provable from the task's files alone, or dependent on what the image or the outside world
# holds. Strongest first.
EvidenceTier = Literal["executed", "self-contained", "assumed"]
EVIDENCE_TIERS: tuple[str, ...] = ("executed", "self-contained", "assumed")
# What a static check claims (issue 37): a fact of the task's files (`intrinsic`), or that
# something is missing at run time (`absence`), which only a run in the task's image shows.
Claim = Literal["intrinsic", "absence"]
ASSUMED_CONFIDENCE = 0.3

REPORT_THRESHOLD = 0.3


def confidence_tier(confidence: float) -> Tier:
    """Confirmed >= 0.8, Likely 0.55-0.79, Possible 0.3-0.54, below 0.3 suppressed."""
    if confidence >= 0.8:
        return "Confirmed"
    if confidence >= 0.55:
        return "Likely"
    if confidence >= REPORT_THRESHOLD:
        return "Possible"
    return "Suppressed"


class Evidence(BaseModel):
    """A citation: file (task-relative path), 1-based inclusive line range, quoted snippet."""

    file: str
    line_start: int | None = None
    line_end: int | None = None
    snippet: str = ""


class Finding(BaseModel):
    """One benchmark defect, from a model or a static/execution check."""

    task_id: str
    category: str
    subcategory: str
    severity: Severity
    finding_type: FindingType
    title: str
    description: str
    evidence: list[Evidence] = Field(default_factory=list)
    recommendation: str = ""
    confidence: float = Field(ge=0.0, le=1.0)
    source: str  # model name, or "static"
    protocol: Protocol
    evidence_verified: bool | None = None  # None until checked against the loaded files
    evidence_problems: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)  # all sources after an ensemble merge
    # None only while validating: records written before tiers existed get one from their
    # evidence (a cited execution log: executed; task files: self-contained).
    evidence_tier: EvidenceTier | None = None
    claim: Claim | None = None  # static checks only
    tier_reason: str = ""  # why the evidence tier is what it is (static and execution checks)

    @field_validator("subcategory")
    @classmethod
    def _known_subcategory(cls, value: str) -> str:
        if value not in SUBCATEGORIES:
            raise ValueError(f"unknown subcategory '{value}'")
        return value

    @model_validator(mode="after")
    def _category_matches(self) -> Finding:
        expected = SUBCATEGORIES[self.subcategory]
        if self.category != expected:
            raise ValueError(
                f"category '{self.category}' does not match subcategory '{self.subcategory}' "
                f"(expected '{expected}')"
            )
        if not self.sources:
            self.sources = [self.source]
        if self.evidence_tier is None:
            executed = any(normalize_logs(e.file).startswith("logs/") for e in self.evidence)
            self.evidence_tier = "executed" if executed else "self-contained"
        return self

    @property
    def tier(self) -> Tier:
        return confidence_tier(self.confidence)

    def at_least(self, tier: str | None) -> bool:
        """True when the finding's evidence tier is `tier` or stronger (None: any)."""
        if tier is None:
            return True
        return EVIDENCE_TIERS.index(self.evidence_tier or "assumed") <= EVIDENCE_TIERS.index(tier)

    @property
    def reported(self) -> bool:
        """Findings below the 0.3 threshold stay in the records but not in the report."""
        return self.confidence >= REPORT_THRESHOLD


def normalize_logs(path: str) -> str:
    """A cited path without a leading "./" or "/" (enough to tell an execution log)."""
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def apply_tier_rule(finding: Finding) -> Finding:
    """The one rule of evidence tiers: an `assumed` finding is at most Low, a Warning, with
    confidence at most 0.3 (its description says what could not be seen); Critical and High
    need `executed` or `self-contained` evidence."""
    if finding.evidence_tier != "assumed":
        return finding
    return finding.model_copy(
        update={
            "severity": "Low",
            "finding_type": "Warning",
            "confidence": min(finding.confidence, ASSUMED_CONFIDENCE),
        }
    )


def parse_evidence_tier(value: str | None) -> str | None:
    """A `--min-tier` value checked against the known tiers (None: no filter)."""
    if value is None or value == "any":
        return None
    if value not in EVIDENCE_TIERS:
        from metaeval.errors import ConfigError

        raise ConfigError(
            f"unknown evidence tier '{value}' ({', '.join(EVIDENCE_TIERS)}, any)", field="min_tier"
        )
    return value
