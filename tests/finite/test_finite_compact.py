"""CompactHistogram (Algorithm 9): M0 against M(0, U) exactly, the whole release's distribution
enumerated on a tiny field (its privacy loss equals the per-key one: the factorisation),
exact per-key privacy both directions, marginals and accuracy by simulation, files, bad input."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA

from privhist import InputDataError, SeededRandom, ValidationError
from privhist.accounting.profile import check_dp
from privhist.core.data import Counts
from privhist.core.neighbouring import Neighbouring
from privhist.io.compact import read_compact, write_compact
from privhist.io.writers import write_release
from privhist.mechanisms.finite.compact import (
    CompactCounts,
    CompactHistogram,
    EmptyBinSampler,
)
from privhist.mechanisms.finite.geometric import FastSample
from privhist.mechanisms.finite.gf2 import GF2m


def test_parameters_follow_the_budget_split() -> None:
    m = CompactHistogram(0.5, universe_bits=64, max_keys=10, count_bound=100)
    # c 2**-K + 2**-J <= eps / l0 (add/remove: c = l0 = 1)
    assert Fraction(1, 2**m.k) + Fraction(1, 2**m.j) <= Fraction(1, 2)
    assert (m.k, m.j) == (2, 3)  # ceil(log2(4/(3*0.5))) = 2, ceil(log2(8)) = 3
    assert m.field.m == 162  # 2**54 < 2**64 <= 2**162
    g = m.gamma
    assert Fraction(2**m.field.m) * g >= 2 ** (m.j + 1) * (m.n + 1)


@pytest.mark.parametrize(
    "mech",
    [
        CompactHistogram(0.5, universe_bits=8, max_keys=3, count_bound=12),
        CompactHistogram(1.0, 0.0, Neighbouring.replace(), universe_bits=20, count_bound=30),
    ],
)
def test_empty_bin_distribution_is_within_closeness_both_ways(mech: CompactHistogram) -> None:
    f0 = mech.sampler.pmf(0)
    for z in range(mech.n + 1):
        ratio = mech.m0.pmf(z) / f0[z]
        assert 1 / mech.closeness <= ratio <= mech.closeness
    assert sum(mech.m0.pmf(z) for z in range(mech.n + 1)) == 1


def test_exact_per_key_privacy_both_directions() -> None:
    for mech in CompactHistogram.test_instances():
        assert isinstance(mech, CompactHistogram)
        c = mech.neighbouring.linf_sensitivity
        eps = mech.key_budget().epsilon
        for count in range(0, 6):
            for j in range(1, c + 1):
                p = mech.key_distribution(count, count)
                q = mech.key_distribution(count + 1, count + j)
                assert check_dp(p.probabilities, q.probabilities, eps, 0.0).holds
                assert check_dp(q.probabilities, p.probabilities, eps, 0.0).holds
        # power check: FastSample at K - 2 breaks the guarantee between counts 0 and 1
        weak = FastSample.from_k(mech.n, mech.k - 2, mech.gamma)
        p = {z: mech.m0.pmf(z) for z in range(mech.n + 1)}
        q = dict(enumerate(weak.pmf(c)))
        assert not (check_dp(p, q, eps, 0.0).holds and check_dp(q, p, eps, 0.0).holds)


def _tiny(n: int = 2) -> CompactHistogram:
    """CompactHistogram of degree 1 moved onto GF(64) so whole releases can be enumerated."""
    mech = CompactHistogram(1.0, universe_bits=6, max_keys=1, count_bound=n)
    mech.field = GF2m(1)
    mech.m0 = EmptyBinSampler(FastSample.from_k(n, 1, "1/4"), 6)
    mech.sampler = mech.m0.sampler
    return mech


def _release_distribution(
    mech: CompactHistogram, data: dict[int, int]
) -> dict[tuple[int, int], Fraction]:
    """Exact distribution of the polynomial (c0, c1) released on ``data`` (at most one key),
    following Algorithm 9 step by step with an independent degree-1 interpolation."""
    F = mech.field
    out: dict[tuple[int, int], Fraction] = {}
    keys = [k for k, v in data.items() if v > 0]
    extra = F.size - 1 if not keys or keys[0] != F.size - 1 else F.size - 2
    if not keys:
        for a, b in itertools.product(range(F.size), repeat=2):
            out[(a, b)] = Fraction(1, F.size**2)
        return out
    x1 = keys[0]
    pmf = mech.sampler.pmf(min(data[x1], mech.n))
    for noisy, pr in enumerate(pmf):
        low, size = mech.m0.preimage(noisy)
        for y1 in range(low, low + size):
            for y2 in range(F.size):
                slope = F.mul(y1 ^ y2, F.inv(x1 ^ extra))
                c0 = y1 ^ F.mul(slope, x1)
                key = (c0, slope)
                out[key] = out.get(key, Fraction(0)) + pr / size / F.size
    return out


def test_whole_release_enumerated_on_a_tiny_field() -> None:
    mech = _tiny()
    empty = _release_distribution(mech, {})
    one = _release_distribution(mech, {5: 1})
    two = _release_distribution(mech, {5: 2})
    assert sum(one.values()) == 1 and sum(two.values()) == 1
    # the simulation (code under test) draws from this distribution: interpolate matches
    F = mech.field
    rng = SeededRandom(5)
    seen = []
    for _ in range(3000):
        rel = mech.release(Counts.from_arrays([5], [1]), rng)
        cs = [int(c, 16) for c in rel.metadata["compact"]["coefficients"]]
        seen.append(tuple(cs))
        assert len(cs) == 2
    # the count of key 5 follows M(1); other keys follow M0
    counts = CompactCounts.from_release(rel)
    assert counts.count(5) in range(mech.n + 1)
    # the privacy loss of the whole release equals the per-key loss (factorisation)
    per_key = max(
        max(mech.sampler.pmf(1)[z] / mech.m0.pmf(z), mech.m0.pmf(z) / mech.sampler.pmf(1)[z])
        for z in range(mech.n + 1)
    )
    whole = max(max(one[o] / empty[o], empty[o] / one[o]) for o in empty)
    assert whole == per_key
    per_key12 = max(
        max(a / b, b / a) for a, b in zip(mech.sampler.pmf(1), mech.sampler.pmf(2), strict=True)
    )
    assert max(max(one[o] / two[o], two[o] / one[o]) for o in empty) == per_key12

    # goodness of fit of the sampled polynomials against the enumerated distribution, pooled by
    # the count they give key 5 and key 9 (an empty key)
    def cell(o: tuple[int, int]) -> tuple[int, int]:
        return (
            mech.m0.evaluate((o[0] ^ F.mul(o[1], 5)) + 1),
            mech.m0.evaluate((o[0] ^ F.mul(o[1], 9)) + 1),
        )

    exp: dict[tuple[int, int], Fraction] = {}
    for o, p in one.items():
        exp[cell(o)] = exp.get(cell(o), Fraction(0)) + p
    cells = sorted(exp)
    obs = np.array([sum(cell(o) == c for o in seen) for c in cells], dtype=float)
    e = np.array([float(exp[c]) * len(seen) for c in cells])
    assert stats.chisquare(obs, e).pvalue > ALPHA


def test_marginals_and_accuracy_by_simulation() -> None:
    mech = CompactHistogram(1.0, universe_bits=64, max_keys=40, count_bound=200)
    rng = SeededRandom(11)
    present = list(range(10**12, 10**12 + 40))
    absent = list(range(7, 7 + 400))
    errors = []
    zeros = []
    fives = []
    for _ in range(3):
        rel = mech.release(Counts.from_arrays(present, [5] * 40), rng)
        q = CompactCounts.from_release(rel)
        got_p = q.counts(present)
        got_a = q.counts(absent)
        fives += got_p
        zeros += got_a
        errors += [abs(g - 5) for g in got_p] + got_a
    # per-query accuracy: P[|error| > width] <= beta
    bad = sum(e > mech.width for e in errors)
    assert stats.binomtest(bad, len(errors), float(mech.beta), alternative="greater").pvalue > ALPHA
    # empty keys follow M0, present keys M(5)
    for values, pmf in (
        (zeros, [mech.m0.pmf(z) for z in range(mech.n + 1)]),
        (fives, mech.sampler.pmf(5)),
    ):
        p = np.array([float(x) for x in pmf])
        top = 12
        obs = np.bincount(np.minimum(values, top), minlength=top + 1)[: top + 1].astype(float)
        exp = np.append(p[:top], p[top:].sum()) * len(values)
        keep = exp >= 5
        obs2 = np.append(obs[keep], obs[~keep].sum())
        exp2 = np.append(exp[keep], exp[~keep].sum())
        if exp2[-1] == 0:
            obs2, exp2 = obs2[:-1], exp2[:-1]
        assert stats.chisquare(obs2, exp2 * obs2.sum() / exp2.sum()).pvalue > ALPHA
    # power: the empty keys are not distributed as M(2)
    w = np.array([float(x) for x in mech.sampler.pmf(2)])
    obs = np.bincount(np.minimum(zeros, 6), minlength=7)[:7].astype(float)
    wrong = np.append(w[:6], w[6:].sum()) * len(zeros)
    assert stats.chisquare(obs, wrong).pvalue < ALPHA


def test_files_round_trip(tmp_path: pytest.TempPathFactory) -> None:  # type: ignore[name-defined]
    mech = CompactHistogram(0.8, universe_bits=32, key_encoding="int", max_keys=5, count_bound=50)
    rel = mech.release(Counts.from_arrays([3, 4], [30, 2]), SeededRandom(1))
    direct = CompactCounts.from_release(rel).counts([3, 4, 5, 2**32 - 1])
    a = write_compact(rel, tmp_path / "c.json")  # type: ignore[operator]
    b = write_release(rel, tmp_path / "r.json")  # type: ignore[operator]
    c = write_release(rel, tmp_path / "r.parquet")  # type: ignore[operator]
    for path in (a, b, c):
        assert CompactCounts(read_compact(path)).counts([3, 4, 5, 2**32 - 1]) == direct
    doc = json.loads(a.read_text())
    assert doc["metadata"]["compact"]["field"]["modulus"] == "x^54 + x^27 + 1"
    assert len(doc["metadata"]["compact"]["coefficients"]) == 6
    csv = write_release(rel, tmp_path / "r.csv")  # type: ignore[operator]
    with pytest.raises(InputDataError, match="not JSON"):
        CompactCounts(read_compact(csv))


def test_utf8_keys() -> None:
    mech = CompactHistogram(1.0, universe_bits=64, key_encoding="utf8", max_keys=3, count_bound=9)
    rel = mech.release(Counts.from_arrays(["apple", "pear"], [9, 1]), SeededRandom(2))
    q = CompactCounts.from_release(rel)
    assert all(0 <= v <= 9 for v in q.counts(["apple", "pear", "fig"]))
    with pytest.raises(ValidationError, match="parameter 'keys'"):
        q.count("a string far too long for sixty-four bits")


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="nearest valid setting is epsilon=1"):
        CompactHistogram(2.0)
    for kw in ({"universe_bits": 0}, {"max_keys": 0}, {"count_bound": 0}, {"strict_time": 1}):
        with pytest.raises(ValidationError, match=f"parameter '{next(iter(kw))}'"):
            CompactHistogram(0.5, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'key_encoding'"):
        CompactHistogram(0.5, key_encoding="base64")
    mech = CompactHistogram(0.5, universe_bits=8, max_keys=2, count_bound=9)
    with pytest.raises(ValidationError, match="parameter 'keys'"):
        mech.release(Counts.from_arrays([256], [1]), SeededRandom(1))
    with pytest.raises(InputDataError, match="max_keys"):
        mech.release(Counts.from_arrays([1, 2, 3], [1, 1, 1]), SeededRandom(1))


def test_guarantee_names_the_promise_on_the_number_of_keys() -> None:
    """Regression: the stated guarantee was unconditional, yet data with more than max_keys keys
    is refused, and under add/remove neighbours one record can cross that bound (refused
    against released: no (eps, 0) bound). The guarantee must say it holds under the promise."""
    mech = CompactHistogram(0.5, universe_bits=8, max_keys=2, count_bound=9)
    r = mech.release(Counts.from_arrays([1, 2], [1, 1]), SeededRandom(1))
    g = r.metadata["guarantee"]
    assert "max_keys = 2" in g["condition"] and "max_keys = 2" in g["statement"]
    assert g["epsilon"] == 0.5 and g["delta"] == 0
    with pytest.raises(InputDataError, match="max_keys"):
        mech.release(Counts.from_arrays([1, 2, 3], [1, 1, 1]), SeededRandom(1))
    with pytest.raises(InputDataError, match="not a compact histogram"):
        CompactCounts({"format": "other"})
