"""The experiment's data (Section 5, second paragraph): the synthetic Binomial and Geometric
populations, and the Shakespeare words hashed into buckets."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.experiments import _common
from privhist.experiments.sample_threshold.settings import F64, I64, SHAKESPEARE_FILE


def bucket_distribution(dataset: str, buckets: int) -> F64:
    """The synthetic datasets' bucket probabilities (Section 5), conditioned on ``0..B-1``.

    >>> [round(float(x), 4) for x in bucket_distribution("binomial", 4)]
    [0.0667, 0.2667, 0.4, 0.2667]
    >>> [round(float(x), 4) for x in bucket_distribution("geometric", 4)]
    [0.5333, 0.2667, 0.1333, 0.0667]
    """
    if dataset == "binomial":
        # log of C(B, i) 2^-B, in log space so that B = 2**14 does not underflow
        lg = math.lgamma(buckets + 1) - buckets * math.log(2)
        logpmf = np.array(
            [lg - math.lgamma(i + 1) - math.lgamma(buckets - i + 1) for i in range(buckets)]
        )
        pmf = np.exp(logpmf - logpmf.max())
    elif dataset == "geometric":
        q = 1.0 / math.sqrt(buckets)
        pmf = np.exp(np.arange(buckets) * math.log1p(-q)) * q
    else:
        raise ValidationError(
            "dataset", "bucket_distribution", "'binomial' or 'geometric'", dataset
        )
    return np.asarray(pmf / pmf.sum(), dtype=np.float64)


def sample_histogram(pmf: F64, clients: int, rng: RandomSource) -> I64:
    """Counts per bucket of ``clients`` independent draws from ``pmf`` (inverse CDF on 53-bit
    uniforms from ``rng``; data generation, not a release)."""
    cdf = np.cumsum(pmf)
    cdf /= cdf[-1]
    out = np.zeros(pmf.size, dtype=np.int64)
    chunk = 1 << 20
    for start in range(0, clients, chunk):
        size = min(chunk, clients - start)
        u = (rng.uint64(size) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        idx = np.minimum(np.searchsorted(cdf, u, side="right"), pmf.size - 1)
        out += np.bincount(idx, minlength=pmf.size)
    return out


def word_hash(word: str) -> int:
    """The fixed 64-bit hash that maps a word to its bucket (``word_hash(w) % B``).

    >>> word_hash("the") == word_hash("the") != word_hash("thee")
    True
    """
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class Words:
    """Distinct words with their token counts and bucket hashes."""

    words: tuple[str, ...]
    counts: I64
    hashes: npt.NDArray[np.uint64]

    @property
    def tokens(self) -> int:
        return int(self.counts.sum())

    def histogram(self, buckets: int) -> I64:
        """Token counts per bucket, ``bucket = word_hash(word) % buckets``."""
        idx = (self.hashes % np.uint64(buckets)).astype(np.int64)
        return np.bincount(idx, weights=self.counts, minlength=buckets).astype(np.int64)


def read_words(path: str | Path) -> Words:
    """Word tokens of a plain-text file (``.gz`` allowed) as in ``privhist histogram --text``."""
    words, counts = _common.read_key_counts(path, "text", "sample-threshold")
    hashes = np.array([word_hash(w) for w in words], dtype=np.uint64)
    return Words(tuple(words), counts, hashes)


def default_shakespeare() -> Path:
    """``../shared/data/shakespeare_pg100.txt.gz`` from the working directory, or beside the
    source tree's project directory when that one exists."""
    return _common.default_data_path(SHAKESPEARE_FILE)
