"""`audit plan`: what an audit run will call, and an estimate of what it will cost, before
anything is spent.

Per model: one call per task (a repair retry, when a reply does not parse, is not counted),
its settings, whether its key variable is set, the prompt tokens estimated from the rendered
prompts (characters / 4), and the cost: the prompts at the input price plus, as the upper
bound, every call writing its whole output budget at the output price. Prices come from the
models file (`price`), else the price table; a model with neither has no estimate. Nothing is
called and nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from metaeval.models.pricing import price_table
from metaeval.protocols.audit.models_file import Price
from metaeval.protocols.audit.plan import plan_tasks
from metaeval.protocols.audit.prompt_render import prompt_chars, render_messages
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.protocols.audit.task_hints import load_hints
from metaeval.protocols.audit.task_view import load_task

CHARS_PER_TOKEN = 4  # a rough rule for English text and code; providers count exactly


class ModelPlan(BaseModel):
    """One model's share of the run."""

    model: str
    calls: int
    temperature: float
    max_tokens: int
    reasoning: bool
    key_env: str | None = None
    key_set: bool | None = None  # None: the model names no key variable
    prompt_tokens: int
    price: Price | None = None

    @property
    def input_cost(self) -> float | None:
        return None if self.price is None else self.prompt_tokens * self.price.input / 1e6

    @property
    def max_cost(self) -> float | None:
        if self.price is None:
            return None
        output = self.calls * self.max_tokens * self.price.output / 1e6
        return self.prompt_tokens * self.price.input / 1e6 + output


def _price(settings: AuditSettings, model: str) -> Price | None:
    own = settings.model_settings(model).price
    if own is not None:
        return own
    listed = price_table().lookup(model)
    if listed is None:
        return None
    return Price(input=listed.input_per_mtok, output=listed.output_per_mtok)


def plan_audit(settings: AuditSettings) -> tuple[int, list[ModelPlan]]:
    """(tasks audited, each model's plan) for the run `settings` describe."""
    task_dirs, _ = plan_tasks(settings.bench_dir, settings.task_filter)
    hints = load_hints(settings.bench_dir)
    protocol = settings.protocol_name()
    chars = 0
    for task_dir in task_dirs:
        task = load_task(
            task_dir,
            hints=hints,
            tier=settings.tier,
            bench_root=settings.bench_dir,
            agent_results=settings.agent_results,
        )
        chars += prompt_chars(render_messages(task, protocol))
    plans = []
    for model in [] if settings.static_only else settings.models:
        own = settings.model_settings(model)
        plans.append(
            ModelPlan(
                model=model,
                calls=len(task_dirs),
                temperature=own.call.temperature,
                max_tokens=own.max_tokens,
                reasoning=own.call.answer.reasoning,
                key_env=own.key_env,
                key_set=bool(os.environ.get(own.key_env)) if own.key_env else None,
                prompt_tokens=chars // CHARS_PER_TOKEN,
                price=_price(settings, model),
            )
        )
    return len(task_dirs), plans


def _usd(value: float) -> str:
    return f"${value:.2f}"


def plan_lines(bench_dir: Path, n_tasks: int, plans: list[ModelPlan]) -> list[str]:
    """The plan as the command prints it."""
    lines = [f"audit plan: {n_tasks} task(s) of {bench_dir}; nothing is called or written"]
    for p in plans:
        key = "" if p.key_set is None else f", key {p.key_env} {'set' if p.key_set else 'NOT SET'}"
        output = p.calls * p.max_tokens
        if p.input_cost is None or p.max_cost is None:
            cost = "no price: add `price` to its models-file entry for an estimate"
        else:
            cost = f"{_usd(p.input_cost)} for the prompts, at most {_usd(p.max_cost)}"
        lines.append(
            f"- {p.model}: {p.calls} call(s), temperature {p.temperature:g}, max_tokens "
            f"{p.max_tokens}, reasoning {'on' if p.reasoning else 'off'}{key}; prompts "
            f"~{p.prompt_tokens} tokens, output at most {output} tokens; {cost}"
        )
    costs = [p.max_cost for p in plans]
    if plans and None not in costs:
        total = sum(c for c in costs if c is not None)
        lines.append(f"at most {_usd(total)} in all (the judge of `audit score` not included)")
    elif plans:
        lines.append("no total: a model has no price")
    return lines
