"""Exact privacy checks, the lemma, formulas and sampling tests for vote selection.

The exact law of the released set is computed here independently of the release path: every
order of the keys (the public order is a uniform random permutation of the keys present, since
the salted hash ranks distinct keys uniformly) and every order of the users within a degree (the
random priorities) is enumerated, the votes are counted by a separate implementation of the rule
in the module notes, and each key is released independently with the exact rational ``pi`` of
its count. The checks are hockey-stick divergences in both directions with "key absent" an
output (:func:`privhist.accounting.profile.check_dp`), their power (rules that break the lemma
fail), the lemma itself on larger random inputs with coupled orders, the formulas behind the vote
caps and the count noise recomputed with mpmath and scipy, and the release path against the
exact law (chi-square, alpha = 1e-6, with a power check).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy.stats import norm
from tests.scripted_random import ScriptedRandom
from tests.stats import assert_fits, assert_rejects, chi2_cells

from privhist import SeededRandom, ValidationError
from privhist.accounting.profile import check_dp
from privhist.mechanisms.user_level.votes import (
    PairsVoteSource,
    VoteCounts,
    VoteSelection,
    bounded_unit_counts,
    cast_votes,
    votes_in_order,
)

Users = Sequence[frozenset[str]]

# small instances: caps reached by a handful of users
SMALL = [
    VoteSelection(2.0, 0.1),  # pi = 0, .1, .84, .99, 1: cap 3, top cap 4
    VoteSelection(1.0, 0.05, cap_level=0.3),
]


def _pi(m: VoteSelection, n: int) -> Fraction:
    return Fraction(m.selection.reporting_numerator(n), 1 << m.selection.grid_bits)


def _orders(users: Users) -> list[list[int]]:
    """Every voting order of the users: by number of keys, each tie group in every order."""
    groups: dict[int, list[int]] = {}
    for i, u in enumerate(users):
        groups.setdefault(len(u), []).append(i)
    out: list[list[int]] = [[]]
    for d in sorted(groups):
        out = [o + list(p) for o in out for p in itertools.permutations(groups[d])]
    return out


Rule = Callable[[Sequence[str], dict[str, int], int, int], list[str]]


def rule_public_order(ballot: Sequence[str], x: dict[str, int], cap: int, top: int) -> list[str]:
    """The module's rule: the first key below ``cap`` in the public order, else below ``top``."""
    for limit in (cap, top):
        for k in ballot:
            if x[k] < limit:
                return [k]
    return []


def rule_two_votes(ballot: Sequence[str], x: dict[str, int], cap: int, top: int) -> list[str]:
    """A broken rule: every user votes twice (two units)."""
    first = rule_public_order(ballot, x, cap, top)
    return first * 2


def rule_most_voted(ballot: Sequence[str], x: dict[str, int], cap: int, top: int) -> list[str]:
    """A broken rule: the most-voted key below the top cap (a score that falls as counts grow)."""
    open_keys = [k for k in ballot if x[k] < top]
    if not open_keys:
        return []
    best = max(x[k] for k in open_keys)
    return [next(k for k in open_keys if x[k] == best)]


def exact_law(
    m: VoteSelection, users: Users, rule: Rule = rule_public_order
) -> dict[frozenset[str], Fraction]:
    """The exact law of the released key set (module docstring)."""
    keys = sorted(set().union(*users))
    law: Counter[frozenset[str]] = Counter()
    cases = 0
    for perm in itertools.permutations(keys):
        place = {k: i for i, k in enumerate(perm)}
        for order in _orders(users):
            cases += 1
            x = dict.fromkeys(keys, 0)
            for i in order:
                ballot = sorted(users[i], key=place.__getitem__)
                for k in rule(ballot, x, m.cap, m.top_cap):
                    x[k] += 1
            pis = {k: _pi(m, x[k]) for k in keys}
            for r in range(len(keys) + 1):
                for out in itertools.combinations(keys, r):
                    chosen = set(out)
                    p = Fraction(1)
                    for k in keys:
                        p *= pis[k] if k in chosen else 1 - pis[k]
                    if p:
                        law[frozenset(out)] += p
    return {o: p / cases for o, p in law.items()}


def _fs(*sets: str) -> list[frozenset[str]]:
    return [frozenset(s) for s in sets]


# (users without u, u): private keys, cascades through caps, a user with many keys
CASES = [
    (_fs("a", "a", "ab"), frozenset("c")),
    (_fs("a", "a", "ab"), frozenset("a")),
    (_fs("a", "a", "a", "ab", "b"), frozenset("ab")),
    (_fs("ab", "ab", "ab", "bc"), frozenset("abc")),
    (_fs("a", "ab", "ab", "abc", "c"), frozenset("b")),
    (_fs("a", "a", "a", "a", "ab"), frozenset("bcd")),
]


def _random_cases(n: int, seed: int) -> list[tuple[list[frozenset[str]], frozenset[str]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        users = []
        for _ in range(int(rng.integers(3, 6))):
            size = int(rng.integers(1, 3))
            users.append(frozenset(rng.choice(list("abcd"), size=size, replace=False).tolist()))
        u = frozenset(
            rng.choice(list("abcd"), size=int(rng.integers(1, 3)), replace=False).tolist()
        )
        out.append((users, u))
    return out


ALL_CASES = CASES + _random_cases(14, 7)


@pytest.mark.parametrize("m", SMALL, ids=["eps2-delta.1", "eps1-delta.05"])
def test_exact_dp_on_small_neighbours_both_ways(m: VoteSelection) -> None:
    worst = 0.0
    for users, u in ALL_CASES:
        p_with = exact_law(m, [*users, u])
        p_without = exact_law(m, users)
        check = check_dp(p_with, p_without, m.epsilon, m.delta)
        assert check.holds, (users, u, float(check.worst))
        worst = max(worst, float(check.worst))
    # the cases use the delta: a key only u holds is released with probability pi_1 = delta
    assert worst >= 0.99 * m.delta


@pytest.mark.parametrize(
    "rule,generous",
    [(rule_two_votes, 1.0), (rule_most_voted, 1.0), (rule_public_order, 1.3)],
    ids=["two-votes", "most-voted", "pi-for-1.3-delta"],
)
def test_the_exact_check_catches_rules_that_break_the_lemma(rule: Rule, generous: float) -> None:
    """Power: rules that move more than one vote, and the right rule releasing with the
    probabilities of a 1.3 times larger delta, fail the same check on several cases."""
    m = SMALL[0]
    law_m = VoteSelection(m.epsilon, m.delta * generous)
    failed = 0
    for users, u in ALL_CASES:
        check = check_dp(
            exact_law(law_m, [*users, u], rule), exact_law(law_m, users, rule), m.epsilon, m.delta
        )
        failed += not check.holds
    assert failed >= 3


def _ballots(
    users: Users, order: Sequence[int], place: dict[str, int], codes: dict[str, int]
) -> list[list[int]]:
    return [
        sorted((codes[k] for k in users[i]), key=lambda c: place[keys_of(codes)[c]]) for i in order
    ]


def keys_of(codes: dict[str, int]) -> list[str]:
    out = [""] * len(codes)
    for k, c in codes.items():
        out[c] = k
    return out


def test_lemma_one_vote_apart_on_random_inputs_with_coupled_orders() -> None:
    rng = np.random.default_rng(11)
    alphabet = [f"k{i}" for i in range(8)]
    codes = {k: i for i, k in enumerate(alphabet)}
    for trial in range(300):
        n = int(rng.integers(5, 40))
        users = [
            frozenset(rng.choice(alphabet, size=int(rng.integers(1, 5)), replace=False).tolist())
            for _ in range(n)
        ]
        u = frozenset(rng.choice(alphabet, size=int(rng.integers(1, 6)), replace=False).tolist())
        everyone = [*users, u]
        priority = rng.permutation(len(everyone))
        order_b = sorted(range(len(everyone)), key=lambda i: (len(everyone[i]), priority[i]))
        order_a = [i for i in order_b if i != len(users)]
        place = {k: int(p) for k, p in zip(alphabet, rng.permutation(len(alphabet)), strict=True)}
        cap, top = int(rng.integers(1, 4)), 0
        top = cap + int(rng.integers(0, 3))
        xa, ta = votes_in_order(_ballots(everyone, order_a, place, codes), 8, cap=cap, top_cap=top)
        xb, tb = votes_in_order(_ballots(everyone, order_b, place, codes), 8, cap=cap, top_cap=top)
        diff = np.array(xb) - np.array(xa)
        assert diff.min() >= 0 and diff.sum() <= 1, (trial, diff)
        assert abs(tb - ta) <= 1, (trial, ta, tb)


def _blake(salt: bytes, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(salt + key.encode(), digest_size=8).digest(), "big")


def test_cast_votes_follows_the_public_order_and_the_degree_order() -> None:
    users = [1, 1, 2, 3, 3, 3, 4]
    keys = ["x", "y", "y", "x", "y", "z", "z"]
    salt_words = [12345, 67890]
    priorities = [5, 1, 9, 3]  # users 1, 2, 3, 4 (sorted labels)
    v = cast_votes(users, keys, cap=1, top_cap=2, rng=ScriptedRandom(salt_words + priorities))
    salt = np.array(salt_words, dtype=np.uint64).astype(">u8").tobytes()
    place = {k: _blake(salt, k) for k in "xyz"}
    # voting order: degree 1 (users 2, 4 by priority 1 < 3), degree 2 (user 1), degree 3 (user 3)
    holdings = {1: "xy", 2: "y", 3: "xyz", 4: "z"}
    x = dict.fromkeys("xyz", 0)
    late = 0
    for user in (2, 4, 1, 3):
        ballot = sorted(holdings[user], key=place.__getitem__)
        below = [k for k in ballot if x[k] < 1]
        if not below:
            late += 1
            below = [k for k in ballot if x[k] < 2]
        if below:
            x[below[0]] += 1
    assert dict(zip(v.keys.tolist(), v.votes.tolist(), strict=True)) == {
        k: c for k, c in x.items() if c
    }
    assert v.non_voters == late


def test_pi_and_caps_match_an_independent_recursion() -> None:
    for eps, delta in [(1.0, 1e-8), (2.0, 0.1), (3.0, math.exp(-10)), (0.5, 1e-6)]:
        m = VoteSelection(eps, delta)
        with mpmath.workdps(60):
            e, d = mpmath.exp(mpmath.mpf(eps)), mpmath.mpf(delta)
            real = [mpmath.mpf(0)]
            while real[-1] < 1:
                p = real[-1]
                real.append(min(e * p + d, 1 - (1 - p - d) / e, mpmath.mpf(1)))
        for n, r in enumerate(real):
            grid = _pi(m, n)
            assert grid <= Fraction(str(mpmath.nstr(r, 50))) + Fraction(1, 10**40)
            assert float(r) - float(grid) < 1e-9  # roundings, grown by e^eps per step
        first_09 = next(n for n in range(len(real)) if _pi(m, n) >= Fraction(9, 10))
        first_1 = next(n for n in range(len(real) + 5) if _pi(m, n) == 1)
        assert (m.cap, m.top_cap) == (first_09, first_1)


def _gaussian_delta(eps: float, mu2: float) -> float:
    mu = math.sqrt(mu2)
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-8), (1.0, 1e-5), (3.0, math.exp(-10))])
def test_count_noise_and_the_whole_delta_recomputed_with_scipy(eps: float, delta: float) -> None:
    m = VoteSelection(eps, delta, counts=True, count_noise="gaussian")
    assert Fraction(m.epsilon_selection) + Fraction(m.epsilon_counts) <= Fraction(eps)
    assert Fraction(m.delta_selection) + Fraction(m.delta_counts) <= Fraction(delta)
    k, s2 = m.count_max_keys, float(m.count_sigma2)
    assert s2 >= 1
    ours = _gaussian_delta(m.epsilon_counts - 2 * k / s2, k / s2)
    assert ours <= m.delta_counts * (1 + 1e-9)
    # the smallest such variance: 2 % less noise variance exceeds the count's delta
    assert _gaussian_delta(m.epsilon_counts - 2 * k / (0.98 * s2), k / (0.98 * s2)) > m.delta_counts
    assert m.certified_delta() <= delta
    assert abs(m.count_delta() - ours) <= 1e-6 * ours


def _release_law(m: VoteSelection, users: Users) -> tuple[list[frozenset[str]], list[float]]:
    law = exact_law(m, users)
    outs = sorted(law, key=lambda o: sorted(o))
    return outs, [float(law[o]) for o in outs]


def test_release_frequencies_match_the_exact_law() -> None:
    m = SMALL[0]
    users = _fs("a", "a", "ab", "abc", "bc")
    outs, probs = _release_law(m, users)
    flat_u = [i for i, s in enumerate(users) for _ in s]
    flat_k = [k for s in users for k in sorted(s)]
    n = 6000
    seen: Counter[frozenset[str]] = Counter()
    for i in range(n):
        rel = m.release(PairsVoteSource(flat_u, flat_k, SeededRandom(i)), SeededRandom(10**6 + i))
        seen[frozenset(rel.keys.tolist())] += 1
    assert set(seen) <= set(outs)
    observed = [seen[o] for o in outs]
    assert_fits(chi2_cells(observed, probs, max_cells=None))
    # power: the law of the rule with each user's keys in its own random order is rejected,
    # and so is the law with a twice larger delta
    wrong = VoteSelection(2.0, 0.2)
    _, probs_w = _release_law(wrong, users)
    law_w = dict(zip(_release_law(wrong, users)[0], probs_w, strict=True))
    assert_rejects(chi2_cells(observed, [law_w.get(o, 0.0) + 1e-12 for o in outs], max_cells=None))


def test_counts_are_clipped_and_say_what_they_cover() -> None:
    users = [u for u in range(60) for _ in range(2)]
    keys = [k for u in range(60) for k in ("a", "b" if u < 30 else "c")]
    m = VoteSelection(2.0, 1e-3, counts=True, count_max_keys=2)
    rel = m.release(PairsVoteSource(users, keys, SeededRandom(0)), SeededRandom(1))
    assert rel.values is not None and rel.lower is not None and rel.upper is not None
    assert (rel.values >= 1).all() and (rel.lower >= 1).all()
    assert (rel.lower <= rel.values).all() and (rel.values <= rel.upper).all()
    assert rel.estimates is None and "estimate" not in rel.columns()
    assert "covers" in rel.metadata["counts"]["interval"]
    # a count far below zero is clipped to 1 (a released key has at least one holder)
    from privhist.mechanisms.user_level._counts import clipped_count_columns

    cols = clipped_count_columns(np.array([-9, 0, 5]), Fraction(4), 0.95)
    assert cols["values"].tolist() == [1, 1, 5]


def test_bounded_unit_counts_keeps_at_most_k_keys_per_user() -> None:
    users = [1, 1, 1, 2, 2, 3]
    keys = ["a", "b", "c", "a", "b", "a"]
    for seed in range(20):
        c = bounded_unit_counts(users, keys, ["a", "b", "c", "z"], 2, SeededRandom(seed))
        counts = dict(zip(c.keys.tolist(), c.counts.tolist(), strict=True))
        assert counts["z"] == 0 and sum(counts.values()) == 2 + 2 + 1  # user 1 keeps 2 of 3
        assert counts["a"] >= 2 and counts["b"] >= 1


def test_validation_fails_closed() -> None:
    with pytest.raises(ValidationError, match="parameter 'epsilon' of VoteSelection must be"):
        VoteSelection(-1.0, 1e-6)
    with pytest.raises(ValidationError, match="delta"):
        VoteSelection(1.0, 0.0)
    with pytest.raises(ValidationError, match="cap_level"):
        VoteSelection(1.0, 1e-6, cap_level=1.5)
    with pytest.raises(ValidationError, match="source"):
        VoteSelection(1.0, 1e-6).release("not a source")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="votes"):
        VoteSelection(1.0, 1e-6).release_votes(
            VoteCounts(np.array(["a"]), np.array([10**6], dtype=np.int64)), None
        )
    with pytest.raises(ValidationError, match="top_cap"):
        cast_votes([1], ["a"], cap=3, top_cap=2, rng=SeededRandom(0))


def test_a_user_with_many_private_keys_changes_one_vote() -> None:
    # no cap on the keys a user holds: 50 private keys still move one vote
    m = VoteSelection(1.0, 1e-6)
    base = [u for u in range(40) for _ in range(1)]
    base_keys = ["shared"] * 40
    priv = [f"p{i}" for i in range(50)]
    for seed in range(5):
        a = cast_votes(base, base_keys, cap=m.cap, top_cap=m.top_cap, rng=SeededRandom(seed))
        b = cast_votes(
            base + [999] * 50,
            base_keys + priv,
            cap=m.cap,
            top_cap=m.top_cap,
            rng=SeededRandom(seed),
        )
        assert int(b.votes.sum()) - int(a.votes.sum()) <= 1
        assert sum(1 for k in b.keys.tolist() if k.startswith("p")) <= 1


# -- coded pairs (the engines code text with their table library) --------------------------------

_TEXT = ["", "a", "b", "A", "\x00", "a\x00", "é", "ß", "\uffff", "\ue000", "\U0001f600", "0", " "]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return ["".join(rng.choice(_TEXT, size=int(rng.integers(0, 4)))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_vote_codes_are_numpys_codes(seed: int) -> None:
    import polars as pl

    from privhist.engines.local.weighting import vote_codes

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    users: list[object] = [int(x) for x in rng.integers(-9, 9, n)] if seed % 2 else _texts(rng, n)
    keys = [*_texts(rng, n - 2), "a", "a\x00"]
    pairs = pl.DataFrame({"user": users, "key": keys})
    u, k, labels = vote_codes(pairs)
    _, want_u = np.unique(pairs["user"].to_numpy(), return_inverse=True)
    want_labels, want_k = np.unique(pairs["key"].to_numpy(), return_inverse=True)
    assert u.tolist() == want_u.ravel().tolist() and k.tolist() == want_k.ravel().tolist()
    assert labels.dtype == want_labels.dtype and labels.tolist() == want_labels.tolist()
    # power: NumPy's fixed-width text drops trailing NULs, so "a" and "a\x00" become one label
    fixed = np.unique(np.array(pairs["key"].to_list(), dtype=str))
    assert fixed.tolist() != want_labels.tolist()


def test_coded_votes_equal_the_votes_of_the_labels() -> None:
    from privhist.mechanisms.user_level.votes import cast_coded_votes

    rng = np.random.default_rng(3)
    users = [str(x) for x in rng.integers(0, 60, 400)]
    keys = [f"k{x}" for x in rng.zipf(1.6, 400) % 40]
    ulab, ucode = np.unique(users, return_inverse=True)
    klab, kcode = np.unique(np.array(keys, dtype=object), return_inverse=True)
    for seed in range(4):
        a = cast_votes(users, keys, cap=3, top_cap=5, rng=SeededRandom(seed))
        b = cast_coded_votes(ucode, kcode, klab, cap=3, top_cap=5, rng=SeededRandom(seed))
        assert a.keys.tolist() == b.keys.tolist() and a.votes.tolist() == b.votes.tolist()
        assert (a.non_voters, a.info) == (b.non_voters, b.info)
    # power: codes in another order of the users give other votes for some seed
    flipped = [
        cast_coded_votes(len(ulab) - 1 - ucode, kcode, klab, cap=3, top_cap=5, rng=SeededRandom(s))
        for s in range(4)
    ]
    assert any(
        f.votes.tolist()
        != cast_votes(users, keys, cap=3, top_cap=5, rng=SeededRandom(s)).votes.tolist()
        for s, f in enumerate(flipped)
    )


@pytest.mark.parametrize(
    "users, keys",
    [([0, 2], [0, 0]), ([-1, 0], [0, 0]), ([0, 1], [0, 1]), ([0, 0], [-1, 0])],
)
def test_coded_votes_refuse_codes_that_are_not_ranks(users: list[int], keys: list[int]) -> None:
    from privhist.mechanisms.user_level.votes import cast_coded_votes

    with pytest.raises(ValidationError, match="user_codes"):
        cast_coded_votes(
            users, keys, np.array(["a"], dtype=object), cap=1, top_cap=2, rng=SeededRandom(0)
        )
