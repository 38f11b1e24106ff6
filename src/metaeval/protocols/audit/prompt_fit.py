"""Fitting an audit prompt into a size limit and into a model's context window.

The largest files are shortened first; a shortened file keeps its head and tail with a marker
naming the omitted lines, and its original line numbers, so citations stay checkable. Tokens
are counted with the model's own tokenizer when it runs in process, else estimated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from metaeval.models.base import Model
from metaeval.models.types import Message
from metaeval.protocols.audit.output_schema import DEFAULT_ANSWER, AnswerOptions
from metaeval.protocols.audit.prompt_render import (
    prompt_chars,
    prompt_files,
    render_file,
    render_messages,
)
from metaeval.protocols.audit.prompts import (
    AuditProtocol,
)
from metaeval.protocols.audit.task_view import LoadedTask

# Context-window fitting.
MIN_FILE_CHARS = 200  # a shortened file keeps at least this much of its numbered body
MARKER_SLACK_CHARS = 120  # header note + omission marker added to a shortened file
CHARS_PER_TOKEN = 3.0  # conservative estimate when no tokenizer is available
MESSAGE_OVERHEAD_TOKENS = 16  # chat-template tokens per message
REPAIR_RESERVE_TOKENS = 600  # room for the echoed bad reply and the repair message


@dataclass
class PromptFit:
    """The messages of a prompt, fitted (or not) into a size limit."""

    messages: list[Message]
    chars: int
    fits: bool
    file_budgets: dict[str, int] = field(default_factory=dict)  # path -> body chars kept
    notes: list[str] = field(default_factory=list)
    tokens: int | None = None  # counted or estimated, when fitted to a token limit


def _water_level(sizes: dict[str, int], available: int, floor: int) -> int:
    """The largest cap c >= floor with sum(min(size, c)) <= available (floor if none)."""
    if not sizes:
        return floor
    lo, hi = floor, max(sizes.values())
    if sum(min(s, hi) for s in sizes.values()) <= available:
        return hi
    if sum(min(s, lo) for s in sizes.values()) > available:
        return floor
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes.values()) <= available:
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_prompt(
    task: LoadedTask,
    max_prompt_chars: int | None,
    *,
    protocol: AuditProtocol = "definition",
    answer: AnswerOptions = DEFAULT_ANSWER,
) -> PromptFit:
    """The protocol's prompt, shortened to at most `max_prompt_chars` characters if needed.

    The largest files are shortened first (a common cap on every file's numbered body, lowered
    until the prompt fits; smaller files stay whole). A shortened file keeps its head and tail
    with a marker naming the omitted lines, and its original line numbers. `fits` is False when
    even every file at MIN_FILE_CHARS does not fit (the shortest version is returned).
    """
    messages = render_messages(task, protocol, answer=answer)
    total = prompt_chars(messages)
    if max_prompt_chars is None or total <= max_prompt_chars:
        return PromptFit(messages, total, True)
    files = prompt_files(task, protocol)
    sizes = {f.path: render_file(f).body_chars for f in files}
    overhead = total - sum(sizes.values())
    target = max_prompt_chars
    budgets: dict[str, int] = {}
    notes: list[str] = []
    for _ in range(12):
        available = target - overhead - MARKER_SLACK_CHARS * len(sizes)
        cap = _water_level(sizes, available, MIN_FILE_CHARS)
        budgets = {path: cap for path, size in sizes.items() if size > cap}
        notes = []
        messages = render_messages(task, protocol, file_budgets=budgets, notes=notes, answer=answer)
        total = prompt_chars(messages)
        if total <= max_prompt_chars:
            return PromptFit(messages, total, True, budgets, notes)
        if cap <= MIN_FILE_CHARS:
            break
        target -= total - max_prompt_chars + 50
    return PromptFit(messages, total, False, budgets, notes)


def _llama(model: Model) -> Any:
    loaded = getattr(model, "_loaded", None)
    return getattr(loaded, "llama", None)


def model_context_window(model: Model) -> int | None:
    """The model's context window in tokens, when it can be known.

    A `context_window` attribute wins; in-process llama.cpp models report their n_ctx. Remote
    providers give None (their windows are far larger than a loaded task).
    """
    value = getattr(model, "context_window", None)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    llama = _llama(model)
    if llama is not None:
        try:
            return int(llama.n_ctx())
        except Exception:  # an unexpected llama object: fall back to "unknown"
            return None
    return None


def _token_counter(model: Model) -> Callable[[str], int]:
    llama = _llama(model)
    lock = getattr(getattr(model, "_loaded", None), "lock", None)
    if llama is not None and hasattr(llama, "tokenize"):

        def count(text: str) -> int:
            data = text.encode("utf-8")
            if lock is not None:
                with lock:
                    return len(llama.tokenize(data, add_bos=False, special=True))
            return len(llama.tokenize(data, add_bos=False, special=True))

        try:
            count("probe")
            return count
        except Exception:  # fall back to the estimate
            pass
    return lambda text: math.ceil(len(text) / CHARS_PER_TOKEN)


def fit_prompt_for_model(
    task: LoadedTask,
    model: Model,
    *,
    protocol: AuditProtocol,
    max_tokens: int,
    max_prompt_chars: int | None = None,
    answer: AnswerOptions = DEFAULT_ANSWER,
) -> PromptFit:
    """The prompt fitted to `max_prompt_chars` and to the model's context window (if known).

    The token limit leaves room for `max_tokens` of output and for one repair round; tokens
    are counted with the model's own tokenizer when it is in process, else estimated.
    """
    fit = fit_prompt(task, max_prompt_chars, protocol=protocol, answer=answer)
    window = model_context_window(model)
    if window is None:
        return fit
    limit = window - max_tokens - REPAIR_RESERVE_TOKENS - 2 * MESSAGE_OVERHEAD_TOKENS
    count = _token_counter(model)

    def tokens_of(f: PromptFit) -> int:
        return sum(count(m.content) for m in f.messages)

    tokens = tokens_of(fit)
    if limit <= 0:
        fit.fits = False
        fit.tokens = tokens
        fit.notes.append(
            f"context window {window} tokens leaves no room for a prompt with max_tokens "
            f"{max_tokens}"
        )
        return fit
    if tokens > limit and fit.fits:
        fit, tokens = _shortest_fitting(
            task, fit, tokens, limit, tokens_of, protocol=protocol, answer=answer
        )
    fit.tokens = tokens
    if tokens > limit:
        fit.fits = False
    fit.notes.insert(0, f"prompt: {fit.chars} chars, {tokens} tokens (limit {limit})")
    return fit


def _shortest_fitting(
    task: LoadedTask,
    fit: PromptFit,
    tokens: int,
    limit: int,
    tokens_of: Callable[[PromptFit], int],
    *,
    protocol: AuditProtocol,
    answer: AnswerOptions,
) -> tuple[PromptFit, int]:
    """The prompt under the largest char limit whose tokens fit `limit`, and its tokens (the
    last candidate tried when none fits)."""
    # Search the largest char limit whose prompt fits the token limit: a proportional
    # first guess, then bisection (token density differs between prose and code).
    best: tuple[PromptFit, int] | None = None
    lo, hi = 0, fit.chars  # lo fits (0 = none yet), hi does not
    guess = int(fit.chars * limit / tokens * 0.97)
    for _ in range(12):
        candidate = fit_prompt(task, guess, protocol=protocol, answer=answer)
        count_c = tokens_of(candidate)
        if candidate.fits and count_c <= limit:
            best, lo = (candidate, count_c), guess
        else:
            hi = guess
            if not candidate.fits:
                break  # shorter prompts no longer exist
        if best is None:
            guess = int(guess * limit / max(count_c, 1) * 0.97)
        elif hi - lo <= max(200, hi // 50):
            break
        else:
            guess = (lo + hi) // 2
    if best is None:
        return candidate, count_c  # the last one tried: it does not fit
    return best
