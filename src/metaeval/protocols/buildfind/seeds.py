"""Seeds and option shuffles, all derived deterministically from seed0."""

from __future__ import annotations

import hashlib
import random

LETTERS = ("A", "B", "C", "D")
DEFAULT_SEED0 = 20260501


def derive_seed(seed0: int, *parts: object) -> int:
    """A 31-bit seed from seed0 and the parts naming a cell (stable across runs and machines)."""
    text = "|".join([str(seed0), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


def permutation(seed: int, question_id: str) -> list[str]:
    """Canonical option keys in the order shown to the finder: shown letter i -> result[i]."""
    keys = list(LETTERS)
    random.Random(derive_seed(seed, "shuffle", question_id)).shuffle(keys)
    return keys


def shuffle_options(options: dict[str, str], order: list[str]) -> dict[str, str]:
    """Options relabelled A-D in the shuffled order."""
    return {shown: options[canonical] for shown, canonical in zip(LETTERS, order, strict=True)}


def deshuffle(shown_letter: str | None, order: list[str]) -> str | None:
    """The canonical key behind a shown letter; None for a missing or invalid letter."""
    if shown_letter not in LETTERS:
        return None
    return order[LETTERS.index(shown_letter)]
