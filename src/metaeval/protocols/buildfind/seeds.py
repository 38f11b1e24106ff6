"""Seeds and option shuffles, all derived deterministically from seed0.

Trial seeds follow the paper (Algorithm 1, Appendix C): build trial r runs with seed0 + r and
find trial r' with seed0 + r', which is also its option-shuffle seed (every finder and
artifact of trial r' sees the same order; each question's order mixes the seed with the
question id). A build re-run after an infrastructure failure gets a distinct recovery seed,
seed0 + 1000 * recovery + r (the paper's 202615xx identifiers); a re-run find keeps its seed,
so the finder sees the same options. Runs started before this rule (no ``rule`` in the
manifest's seeds) keep theirs: a hash of seed0 and the cell (`LEGACY_RULE`).
"""

from __future__ import annotations

import hashlib
import random

LETTERS = ("A", "B", "C", "D")
DEFAULT_SEED0 = 20260501


SEED_RULE = "seed0+trial"
LEGACY_RULE = "cell_hash"
RECOVERY_OFFSET = 1000


def run_seed_rule(seeds: object) -> str:
    """The trial-seed rule a run recorded in its manifest's ``seeds`` (legacy when none)."""
    rule = seeds.get("rule") if isinstance(seeds, dict) else None
    return rule if rule == SEED_RULE else LEGACY_RULE


def build_seed(seed0: int, key: dict, recovery: int, rule: str) -> int:
    """The seed of a build cell (task, builder, build_trial) on its `recovery`-th attempt."""
    if rule == SEED_RULE:
        return seed0 + RECOVERY_OFFSET * recovery + int(key["build_trial"])
    return derive_seed(seed0, "build", *key.values(), recovery)


def find_seed(seed0: int, key: dict, rule: str) -> int:
    """The seed (and option-shuffle seed) of a find cell; a view run shares its full-view
    cell's, and a re-run keeps it."""
    if rule == SEED_RULE:
        return seed0 + int(key["find_trial"])
    full_key = [v for k, v in key.items() if k != "view"]
    return derive_seed(seed0, "find", *full_key, 0)


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
