"""How an audit calls its models: temperature, output budget, and what the answer may hold.

`audit run -M KEY=VALUE` takes these keys for the audit itself; every other `-M` key goes to
the model provider as before (a provider's own reasoning options, such as an effort or
thinking setting, pass through that way where the provider has them):

- `temperature` (default 0.0, the paper's);
- `max_tokens` (default 4096, the paper's output budget per call; `--max-tokens` is the same);
- `max_findings`, `max_evidence`, `max_description`: caps asked for in the prompt and the
  output schema (defaults 8, 3, 600 characters);
- `reasoning` (default false): the model writes the paper's phases out before its JSON; no
  output schema is sent then, since constrained decoding admits nothing but the JSON.

All of them are recorded in the run's manifest as settings: resuming a run with another value
is refused, naming the setting (`RunDir` settings comparison).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metaeval.errors import ConfigError
from metaeval.protocols.audit.output_schema import DEFAULT_ANSWER, AnswerOptions

PAPER_MAX_TOKENS = 4096
AUDIT_KEYS = frozenset(
    {"temperature", "max_tokens", "max_findings", "max_evidence", "max_description", "reasoning"}
)


@dataclass(frozen=True)
class ModelCallOptions:
    """The audit's side of a model call (see the module docstring)."""

    temperature: float = 0.0
    answer: AnswerOptions = field(default_factory=lambda: DEFAULT_ANSWER)

    def settings(self) -> dict[str, Any]:
        """The values recorded in the manifest and compared on a rerun, one setting each."""
        return {"temperature": self.temperature, **self.answer.settings()}


def _number(key: str, value: Any, *, integer: bool, low: float, high: float) -> Any:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        what = "an integer" if integer else "a number"
        raise ConfigError(f"-M {key} must be {what} from {low:g} to {high:g}", field=key)
    return value


def split_model_args(pairs: dict[str, Any], max_tokens: int) -> tuple[ModelCallOptions, int]:
    """Take the audit's keys out of parsed `-M` options (`pairs` keeps the provider's):
    the call options and the output budget (`-M max_tokens` wins over `max_tokens`)."""
    mine = {key: pairs.pop(key) for key in list(pairs) if key in AUDIT_KEYS}
    if "max_tokens" in mine:
        max_tokens = _number("max_tokens", mine["max_tokens"], integer=True, low=64, high=1e6)
    temperature = _number(
        "temperature", mine.get("temperature", 0.0), integer=False, low=0.0, high=2.0
    )
    reasoning = mine.get("reasoning", False)
    if not isinstance(reasoning, bool):
        raise ConfigError("-M reasoning must be true or false", field="reasoning")
    answer = AnswerOptions(
        max_findings=_number(
            "max_findings",
            mine.get("max_findings", DEFAULT_ANSWER.max_findings),
            integer=True,
            low=1,
            high=100,
        ),
        max_evidence=_number(
            "max_evidence",
            mine.get("max_evidence", DEFAULT_ANSWER.max_evidence),
            integer=True,
            low=1,
            high=20,
        ),
        max_description=_number(
            "max_description",
            mine.get("max_description", DEFAULT_ANSWER.max_description),
            integer=True,
            low=50,
            high=20000,
        ),
        reasoning=reasoning,
    )
    return ModelCallOptions(temperature=float(temperature), answer=answer), int(max_tokens)
