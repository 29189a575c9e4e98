"""KeepHeavy (Algorithm 4) as post-processing of basic-geometric: exact joint privacy check.

The kept set depends on every key's noisy count, so the check enumerates the joint output over a
small domain (every vector of noisy counts, with its exact product probability) and compares
neighbouring datasets with ``LogRational`` at the ratio the histogram achieves.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest

from privhist import Neighbouring, SeededRandom, ValidationError
from privhist.accounting.profile import LogRational, check_dp
from privhist.core.data import Counts
from privhist.io.release import Release
from privhist.mechanisms.finite.histograms import BasicHistogram, keep_heavy

KEYS = np.array(["a", "b", "c", "d"])


def joint_output(m: BasicHistogram, counts: list[int], keep: int) -> dict[object, Fraction]:
    pmfs = [m.sampler.pmf(min(c, m.n)) for c in counts]
    out: dict[object, Fraction] = defaultdict(Fraction)
    for values in itertools.product(range(m.n + 1), repeat=len(counts)):
        prob = Fraction(1)
        for pmf, v in zip(pmfs, values, strict=True):
            prob *= pmf[v]
        rel = keep_heavy(Release(keys=KEYS, values=np.array(values, dtype=np.int64)), keep)
        assert rel.values is not None
        out[tuple(zip(rel.keys.tolist(), rel.values.tolist(), strict=True))] += prob
    return out


@pytest.mark.parametrize("relation", ["add-remove", "replace"])
def test_keep_heavy_is_exactly_as_private_as_the_histogram(relation: str) -> None:
    nb = Neighbouring.replace() if relation == "replace" else Neighbouring.add_remove()
    m = BasicHistogram(0.8, 0.0, nb, domain=KEYS, count_bound=3)
    ratio = m.ratio**nb.l1_sensitivity
    base = [2, 1, 0, 0]
    if relation == "replace":  # one row moves from one key to another
        neighbours = [[1, 2, 0, 0], [2, 0, 1, 0], [1, 1, 1, 0]]
    else:
        neighbours = [[3, 1, 0, 0], [2, 1, 1, 0], [1, 1, 0, 0]]
    p = joint_output(m, base, keep=2)
    assert sum(p.values()) == 1
    for other in neighbours:
        q = joint_output(m, other, keep=2)
        assert check_dp(p, q, LogRational(ratio), 0).holds
        assert not check_dp(p, q, LogRational(ratio - Fraction(1, 10**9)), 0).holds


def test_keep_heavy_selection_rules() -> None:
    rel = Release(keys=KEYS, values=np.array([5, 3, 3, 1]), lower=np.array([1, 1, 1, 0]))
    assert keep_heavy(rel, 1).keys.tolist() == ["a"]  # above the 2nd largest (3)
    assert keep_heavy(rel, 2).keys.tolist() == ["a"]  # tie at the cut: both 3s dropped
    assert keep_heavy(rel, 3).keys.tolist() == ["a", "b", "c"]
    assert keep_heavy(rel, 4).keys.tolist() == ["a", "b", "c", "d"]  # at most keep keys: all
    kept = keep_heavy(rel, 3)
    assert kept.lower is not None and kept.lower.tolist() == [1, 1, 1]
    assert kept.metadata["post_processing"]["keep_heavy"] == 3
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValidationError, match="parameter 'keep'"):
            keep_heavy(rel, bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="parameter 'release'"):
        keep_heavy(Release(keys=KEYS), 2)


def test_keep_heavy_on_a_real_release_keeps_the_heavy_keys() -> None:
    m = BasicHistogram(0.5, domain=np.arange(1000), count_bound=500)
    data = Counts.from_arrays([3, 7, 11], [400, 300, 200])
    rel = keep_heavy(m.release(data, SeededRandom(4)), 3)
    assert rel.keys.tolist() == [3, 7, 11]
    assert rel.metadata["released_keys"] == 3


def test_registered_keep_heavy_releases_follow_the_joint_law() -> None:
    """The registered ``keep-heavy`` (Algorithm 4 with keep < |domain|): releases against the
    enumerated joint law, which is exactly private both directions (the joint path the generic
    per-key contract cannot take); a neighbour two records away is rejected (power)."""
    from collections import Counter

    from scipy import stats
    from tests.stats import ALPHA

    from privhist.mechanisms.finite.sparse import KeepHeavy

    m = KeepHeavy(0.8, domain=KEYS, count_bound=3, keep=2)
    law = joint_output(m, [2, 1, 0, 0], keep=2)
    for other in ([3, 1, 0, 0], [2, 1, 1, 0], [1, 1, 0, 0]):
        assert check_dp(law, joint_output(m, other, keep=2), LogRational(m.ratio), 0).holds
    rng = SeededRandom(12)
    data = Counts.from_arrays(["a", "b"], [2, 1])
    seen: Counter[object] = Counter()
    for _ in range(3000):
        r = m.release(data, rng)
        assert r.values is not None and len(r) <= 2
        seen[tuple(zip(r.keys.tolist(), r.values.tolist(), strict=True))] += 1

    def pvalue(model: dict[object, Fraction]) -> float:
        support = sorted(model, key=lambda k: -model[k])
        obs = np.array([seen.get(k, 0) for k in support], dtype=float)
        exp = np.array([float(model[k]) for k in support]) * 3000
        keep = exp >= 5
        o, e = np.append(obs[keep], obs[~keep].sum()), np.append(exp[keep], exp[~keep].sum())
        return float(stats.chisquare(o, e * (o.sum() / e.sum())).pvalue)

    assert set(seen) <= set(law)
    assert pvalue(law) > ALPHA
    assert pvalue(joint_output(m, [0, 1, 2, 0], keep=2)) < ALPHA
