"""What a planned run may cost, before anything runs (`metaeval buildfind plan`).

Tokens per run are the paper's own means (Appendix M, Table 17, artifact-present panel):
builds 344.4M input and 3.36M output tokens over 48 runs; formal finds 743.8M and 10.72M over
1,728 runs; the 144 control finds 19.2M in all, split in the formal finds' input/output
proportion. A run config is priced agent by agent from a price table (the bundled one, or
`--prices FILE` in the same format): every input token at the input price (cache discounts
are not assumed, so the figure leans high), output at the output price. An agent whose model
the table does not price is counted in tokens and named as unpriced, never costed at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metaeval.models.pricing import ModelPrice, PriceTable
from metaeval.models.types import Usage
from metaeval.protocols.buildfind.config import AgentSpec, RunConfig

BUILD_TOKENS = (344_400_000 // 48, 3_360_000 // 48)  # (input, output) per build run
FIND_TOKENS = (743_800_000 // 1728, 10_720_000 // 1728)  # per formal find run
_CONTROL_TOTAL = 19_200_000 // 144
_CONTROL_INPUT = _CONTROL_TOTAL * 743_800_000 // (743_800_000 + 10_720_000)
CONTROL_TOKENS = (_CONTROL_INPUT, _CONTROL_TOTAL - _CONTROL_INPUT)  # per control find run
PROVIDERS = {"claude-code": "anthropic", "codex": "openai", "gemini-cli": "google"}


@dataclass
class CostEstimate:
    """Tokens and USD of a plan; `unpriced` names agents whose model has no price."""

    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    unpriced: list[str] = field(default_factory=list)
    priced: set[str] = field(default_factory=set)

    def add(
        self, agent: AgentSpec, runs: int, per_run: tuple[int, int], prices: PriceTable
    ) -> None:
        usage = Usage(input_tokens=runs * per_run[0], output_tokens=runs * per_run[1])
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        price = agent_price(agent, prices)
        if price is None:
            if agent.name not in self.unpriced:
                self.unpriced.append(agent.name)
        else:
            self.usd += price.cost(usage)
            self.priced.add(agent.name)


def agent_price(agent: AgentSpec, prices: PriceTable) -> ModelPrice | None:
    """The price of an agent's model: the model as written, else `provider/model` for a CLI
    agent (claude-code: anthropic, codex: openai, gemini-cli: google); None if unpriced."""
    if not agent.model:
        return None
    found = prices.lookup(agent.model)
    provider = PROVIDERS.get(agent.agent)
    if found is None and provider:
        found = prices.lookup(f"{provider}/{agent.model}")
    return found


def estimate_cost(
    config: RunConfig, tasks: int, pairs: list[tuple[str, str]], prices: PriceTable
) -> CostEstimate:
    """Tokens and cost of every planned build, formal find (every build ok) and control."""
    estimate = CostEstimate()
    finders = {f.name: f for f in config.finders}
    for builder in config.builders:
        estimate.add(builder, tasks * config.r_build, BUILD_TOKENS, prices)
    for _builder, finder in pairs:
        runs = tasks * config.r_build * config.r_find
        estimate.add(finders[finder], runs, FIND_TOKENS, prices)
    for spec in config.finders:
        runs = len(config.controls) * tasks * config.r_find
        estimate.add(spec, runs, CONTROL_TOKENS, prices)
    return estimate


def estimate_lines(estimate: CostEstimate, prices: PriceTable) -> list[str]:
    """The estimate as `plan` prints it."""
    total = estimate.input_tokens + estimate.output_tokens
    lines = [
        f"estimated tokens: {total / 1e6:,.1f}M ({estimate.input_tokens / 1e6:,.1f}M input, "
        f"{estimate.output_tokens / 1e6:,.1f}M output; per-run means of the paper's Table 17)",
    ]
    table = f"price table {prices.source}, version {prices.version}"
    if not estimate.priced:
        lines.append(f"estimated cost: unknown (no agent's model is in the {table}; --prices)")
    else:
        priced = "" if not estimate.unpriced else " for the priced agents"
        lines.append(
            f"estimated cost: ${estimate.usd:,.2f}{priced} ({table}; no cache discount assumed)"
        )
    if estimate.unpriced:
        lines.append(f"unpriced (no price for the model): {', '.join(estimate.unpriced)}")
    return lines
