"""Alignment judge: does an audit finding identify the same defect as a gold issue?

One model call per (gold issue, finding) pair of the same task, answered as constrained JSON
{"verdict": ALIGNED | PARTIAL | UNRELATED, "reasoning": "..."}. Verdicts are cached on disk
under ``<cache_dir>/<hh>/<hash>.json`` (written atomically), keyed by `cache_key`, so scoring
the same pairs again makes no model call. Output that cannot be parsed is retried once; if the
retry fails too, the verdict is UNRELATED with ``judge_error=True`` (never cached on disk, so
a later run asks again).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from metaeval.errors import ConfigError
from metaeval.models.base import Model
from metaeval.models.types import Message, ModelRequest, Usage
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.gold import GoldIssue
from metaeval.records import sha256_text
from metaeval.records.durable import atomic_write
from metaeval.records.nofollow import read_capped

VerdictLabel = Literal["ALIGNED", "PARTIAL", "UNRELATED"]
VERDICTS: tuple[str, ...] = ("ALIGNED", "PARTIAL", "UNRELATED")
REASONING_MAX = 300
MALFORMED_REASONING = "judge output malformed"
CACHE_FORMAT = 2  # 2: Appendix J's user prompt (task id and confidence, no categories)
MAX_CACHE_BYTES = 1024 * 1024

# Prompt sizes: evidence is shown in part (the cache key still covers all of it).
MAX_EVIDENCE_ITEMS = 5
MAX_SNIPPET_CHARS = 800

JUDGE_SYSTEM_PROMPT = """\
You grade a benchmark audit against a reference list of known defects. You are shown one
known defect of a task (the gold issue, written by a human reviewer) and one finding that an
automated auditor reported for the same task. Decide whether the finding identifies the same
underlying defect as the gold issue.

Judge substance, not form. The two texts may use different words, quote different files, be
longer or shorter, or be framed at a different level of abstraction. A useful test is the
repair: picture the change a maintainer would make to resolve the gold issue. If that change
would also resolve the finding (or make it moot), they are the same defect.

Verdicts:
- ALIGNED: the finding names the same root cause as the gold issue; one repair settles both.
- PARTIAL: the finding is about the right part of the task (the same requirement, step,
  output or check) but is too broad or too vague to single out this defect; it is a coarser
  description of the same underlying problem.
- UNRELATED: the finding describes some other problem.

Breaking ties: between ALIGNED and PARTIAL, answer ALIGNED when the root cause is shared.
Between PARTIAL and UNRELATED, answer PARTIAL.

Answer with a JSON object and nothing else. It has two keys: "verdict", one of ALIGNED,
PARTIAL or UNRELATED; and "reasoning", one sentence in your own words that says what the gold
issue and the finding are each about and whether one repair would fix both."""

# Appendix J's user prompt: the gold issue's task, description and evidence, and the finding's
# title, description and confidence; nothing else (no category codes, no cited lines).
JUDGE_USER_TEMPLATE = """\
## Gold issue
Task: {task_id}
Issue: {issue_description}
Evidence: {issue_evidence}

## Audit finding
Title: {finding_title}
Description: {finding_description}
Confidence: {finding_confidence}

Do the issue and the finding describe the same problem?"""

JUDGE_PROMPT_TEMPLATE = (
    "[system]\n" + JUDGE_SYSTEM_PROMPT + "\n\n[user]\n" + JUDGE_USER_TEMPLATE + "\n"
)

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": list(VERDICTS)},
        "reasoning": {"type": "string", "maxLength": REASONING_MAX},
    },
    "required": ["verdict", "reasoning"],
    "additionalProperties": False,
}

RETRY_NUDGE = (
    "That reply was not a valid answer. Reply again with only a JSON object of the form "
    '{"verdict": "ALIGNED" or "PARTIAL" or "UNRELATED", "reasoning": "one short sentence"}.'
)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def template_hash() -> str:
    """``sha256:<hex>`` of the judge prompt template and output schema."""
    return sha256_text(JUDGE_PROMPT_TEMPLATE + "\n" + _canonical(JUDGE_SCHEMA))


class Verdict(BaseModel):
    """The judge's classification of one (gold issue, finding) pair."""

    verdict: VerdictLabel
    reasoning: str = ""
    cached: bool = False  # answered from the disk or in-memory cache, no model call
    judge_error: bool = False  # the judge's output was malformed twice; verdict forced


class JudgeLike(Protocol):
    """What scoring needs from a judge (tests may inject a fake)."""

    def judge(self, gold_issue: GoldIssue, finding: Finding) -> Verdict: ...


def pair_fields(gold_issue: GoldIssue, finding: Finding) -> dict[str, Any]:
    """The pair content the prompt is built from and the cache key covers."""
    return {
        "task_id": gold_issue.task_id,
        "gold": {"description": gold_issue.description, "evidence": gold_issue.evidence},
        "finding": {
            "title": finding.title,
            "description": finding.description,
            "confidence": finding.confidence,
        },
    }


def cache_key(model_name: str, gold_issue: GoldIssue, finding: Finding) -> str:
    """Hex sha256 of the canonical JSON of judge model, template hash and pair content."""
    body = {
        "format": CACHE_FORMAT,
        "judge_model": model_name,
        "template": template_hash(),
        **pair_fields(gold_issue, finding),
    }
    return hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()


def render_user_prompt(gold_issue: GoldIssue, finding: Finding) -> str:
    """The user message for one pair."""
    fields = pair_fields(gold_issue, finding)
    gold, found = fields["gold"], fields["finding"]
    return JUDGE_USER_TEMPLATE.format(
        task_id=fields["task_id"],
        issue_description=gold["description"],
        issue_evidence=gold["evidence"] or "(none given)",
        finding_title=found["title"],
        finding_description=found["description"],
        finding_confidence=f"{found['confidence']:.2f}",
    )


_OBJECT_RE = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str) -> tuple[str, str] | None:
    """(verdict, reasoning) from the judge's reply, or None when it is malformed."""
    candidates = [text.strip()]
    match = _OBJECT_RE.search(text)
    if match and match.group(0) != candidates[0]:
        candidates.append(match.group(0))  # tolerate code fences or chatter around the JSON
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        verdict = data.get("verdict")
        if not isinstance(verdict, str) or verdict.strip().upper() not in VERDICTS:
            continue
        reasoning = data.get("reasoning", "")
        if not isinstance(reasoning, str):
            reasoning = ""
        return verdict.strip().upper(), reasoning.strip()[:REASONING_MAX]
    return None


CATEGORY_JUDGE = "category"
"""`--judge category`: the rule judge below instead of a model."""


class CategoryJudge:
    """A rule judge with no model: ALIGNED when the finding's subcategory equals the gold
    issue's, PARTIAL when only the top-level category (GT, EVAL, INST, ENV) matches, UNRELATED
    otherwise. Deterministic and instant; coarser than an LLM judge (it cannot tell two
    defects of one subcategory apart), so use it for smoke runs and the demo, a strong model
    for numbers you publish."""

    model_name = CATEGORY_JUDGE

    def judge(self, gold_issue: GoldIssue, finding: Finding) -> Verdict:
        if gold_issue.task_id != finding.task_id:
            raise ValueError("judge pairs only a finding and a gold issue of the same task")
        if finding.subcategory == gold_issue.category:
            return Verdict(verdict="ALIGNED", reasoning=f"same subcategory {finding.subcategory}")
        if finding.category == gold_issue.top_category:
            return Verdict(verdict="PARTIAL", reasoning=f"same category {finding.category}")
        return Verdict(verdict="UNRELATED", reasoning="different category")


class Judge:
    """An LLM alignment judge with an on-disk verdict cache (`cache_dir=None`: memory only).

    Thread-safe. Counters: `model_calls`, `cache_hits`, `errors`, `usage`, and `cost_usd`
    (None as soon as one call had no known price).
    """

    def __init__(
        self,
        model: Model,
        cache_dir: str | Path | None,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
    ):
        self.model = model
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._lock = threading.Lock()
        self._memo: dict[str, Verdict] = {}
        self.model_calls = 0
        self.cache_hits = 0
        self.errors = 0
        self.usage = Usage()
        self.cost_usd: float | None = 0.0

    @property
    def model_name(self) -> str:
        return self.model.name

    def cache_key(self, gold_issue: GoldIssue, finding: Finding) -> str:
        return cache_key(self.model.name, gold_issue, finding)

    def cache_path(self, key: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / key[:2] / f"{key}.json"

    def judge(self, gold_issue: GoldIssue, finding: Finding) -> Verdict:
        """Classify one pair; both must belong to the same task."""
        if gold_issue.task_id != finding.task_id:
            raise ValueError(
                f"judge pairs only a finding and a gold issue of the same task "
                f"(gold issue {gold_issue.task_id}/{gold_issue.id}, finding on {finding.task_id})"
            )
        key = self.cache_key(gold_issue, finding)
        with self._lock:
            memo = self._memo.get(key)
        if memo is not None:
            with self._lock:
                self.cache_hits += 1
            return memo.model_copy(update={"cached": True})
        stored = self._read_cache(key)
        if stored is not None:
            with self._lock:
                self.cache_hits += 1
                self._memo[key] = stored
            return stored.model_copy(update={"cached": True})
        verdict = self._ask(gold_issue, finding)
        with self._lock:
            self._memo[key] = verdict
            if verdict.judge_error:
                self.errors += 1
        if not verdict.judge_error:
            self._write_cache(key, gold_issue, finding, verdict)
        return verdict

    # -- model --------------------------------------------------------------------------------

    def _call(self, messages: list[Message]) -> str:
        request = ModelRequest(
            model=self.model.name,
            messages=messages,
            json_schema=JUDGE_SCHEMA,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        result = self.model.complete(request)
        with self._lock:
            self.model_calls += 1
            self.usage = self.usage + result.usage
            if self.cost_usd is not None:
                self.cost_usd = None if result.cost_usd is None else self.cost_usd + result.cost_usd
        return result.text

    def _ask(self, gold_issue: GoldIssue, finding: Finding) -> Verdict:
        messages = [
            Message(role="system", content=JUDGE_SYSTEM_PROMPT),
            Message(role="user", content=render_user_prompt(gold_issue, finding)),
        ]
        first = self._call(messages)
        parsed = parse_verdict(first)
        if parsed is None:
            retry = [
                *messages,
                Message(role="assistant", content=first),
                Message(role="user", content=RETRY_NUDGE),
            ]
            parsed = parse_verdict(self._call(retry))
        if parsed is None:
            return Verdict(verdict="UNRELATED", reasoning=MALFORMED_REASONING, judge_error=True)
        return Verdict(verdict=parsed[0], reasoning=parsed[1])  # type: ignore[arg-type]

    # -- cache --------------------------------------------------------------------------------

    def _read_cache(self, key: str) -> Verdict | None:
        path = self.cache_path(key)
        if path is None:
            return None
        try:  # a link, FIFO or device in the cache is refused, so counts as a miss
            raw = read_capped(path, MAX_CACHE_BYTES)
            data = None if raw is None else json.loads(raw.decode("utf-8"))
        except (OSError, ConfigError, UnicodeDecodeError, json.JSONDecodeError):
            return None  # missing or unreadable: a miss (a good answer overwrites it)
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        try:
            return Verdict(verdict=data["verdict"], reasoning=data.get("reasoning", ""))
        except (KeyError, ValidationError):
            return None

    def _write_cache(
        self, key: str, gold_issue: GoldIssue, finding: Finding, verdict: Verdict
    ) -> None:
        path = self.cache_path(key)
        if path is None:
            return
        record = {
            "key": key,
            "format": CACHE_FORMAT,
            "judge_model": self.model.name,
            "template": template_hash(),
            "verdict": verdict.verdict,
            "reasoning": verdict.reasoning,
            "task_id": gold_issue.task_id,
            "gold_id": gold_issue.id,
            **pair_fields(gold_issue, finding),
        }
        data = json.dumps(record, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
        assert self.cache_dir is not None
        # the cache and its shard directories are walked without following links
        atomic_write(path, data.encode("utf-8"), root=self.cache_dir.parent, mkdir=True)
