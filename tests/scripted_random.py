"""A random source that returns given words, to force rare sampler paths deterministically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privhist.core.random import RandomSource


class ScriptedRandom(RandomSource):
    """Returns the given words in order (then fails): to force rare paths deterministically."""

    def __init__(self, words: Sequence[int]) -> None:
        self.words = [int(w) for w in words]
        self.used = 0

    def uint64(self, n: int) -> Any:
        if self.used + n > len(self.words):
            raise AssertionError(f"asked for more than the {len(self.words)} scripted words")
        out = np.array(self.words[self.used : self.used + n], dtype=np.uint64)
        self.used += n
        return out

    @property
    def description(self) -> str:
        return "scripted words (tests only)"
