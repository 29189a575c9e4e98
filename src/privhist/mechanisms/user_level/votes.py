"""Vote selection: one vote per user, cast in turn, and keys released by optimal selection.

User-level key selection when users hold few keys each, or many keys but few keys overall
matter. Every user casts **one vote** for one of its keys; the users vote one after the other,
and each votes for the first of its keys, in one **public random order of all keys**, whose vote
count is below the public *vote cap* ``Gamma``; a user whose keys all have ``Gamma`` votes votes
the same way against the *top cap* ``Gamma_1`` (the count released with probability one), so
that popular keys are released for sure from votes nobody else needed. A key's votes are then
released by
the optimal partition selection of Desfontaines, Voss, Gipson & Mandayam (2022) (Cohen, Geri,
Sarlos & Stemmer, Algorithm 3 with ``q = 1``; :class:`~privhist.mechanisms.OptimalSelection`):
released with probability ``pi_v`` for ``v`` votes, ``pi_0 = 0``.

This is a sequential *policy* in the sense of Gopi, Gulhane, Kulkarni, Shen, Shokouhi &
Yekhanin (2020), "Differentially Private Set Union" (ICML, Section 5): users see the counts the
users before them built and steer their contribution away from keys that already have enough.
Policy greedy (Carvalho, Wang & Gondara 2022, "Incorporating item frequency for differentially
private set union", AAAI) fills a user's keys in order with fractions of an L1 budget and adds
Laplace noise. Here the budget is one whole vote, so the counts stay integers, and the lemma
below shows that adding a user changes the final counts by **one vote on one key**: the per-key
optimal selection applies unchanged, with no other noise and no union bound over a user's keys
(so no cap on the keys a user holds). Because every user follows the same key order, the votes
of users who share keys gather on the same keys instead of spreading over all of them.

The rule. A salt of 128 random bits is drawn for the release; a key's place in the order is its
64-bit BLAKE2b hash under the salt (ties by key label): a public function of the key alone.
Users vote in increasing order of their number of distinct keys (a user's own data), ties in the
order of an independent uniform 64-bit priority per user, then of the user's label. ``Gamma`` is
the smallest count with ``pi_Gamma >= 1 - cap_level`` and ``Gamma_1`` the smallest with
``pi_(Gamma_1) = 1``: a user votes for the key minimising ``(phase(x_k), place_k)`` among its
keys with ``x_k < Gamma_1``, where ``phase(x) = 0`` below ``Gamma`` and 1 from ``Gamma`` on, and
does not vote when all its keys have ``Gamma_1`` votes.

Guarantee (add or remove one user ``u``; :meth:`VoteSelection.neighbouring`).

1. **Coupling.** Fix the salt and every user's priority (``u``'s included). The key order is the
   same with and without ``u`` (a function of each key alone), and the other users vote in the
   same relative order (their order keys are their own), so the run with ``u`` (counts ``x^B``)
   and the run without (counts ``x^A``) see the same users in the same order, with ``u``
   inserted once.
2. **Lemma (one vote apart).** After every user's turn, ``x^B - x^A`` is ``0`` or ``e_k`` for one
   key ``k``. Before ``u`` the counts are equal; ``u``'s turn adds ``e_k`` (its vote) or nothing.
   Take a later user ``v`` and ``x^B = x^A + e_k``; ``v``'s vote minimises the score
   ``(phase(x_i), place_i)`` over its keys below ``Gamma_1``, and a key's score does not decrease
   when its count grows (``phase`` is nondecreasing). Let ``j`` be ``v``'s vote in run ``A``. If
   ``v`` does not vote in ``A``, every key of ``v`` has ``Gamma_1`` votes in ``A``, hence in ``B``
   (``x^B >= x^A``), and ``v`` votes in neither. If ``j != k``: in ``B`` every key but ``k`` has the
   score it has in ``A`` and ``k``'s is no smaller (or ``k`` is at ``Gamma_1``), so ``j`` still
   minimises: both runs add ``e_j`` and the difference stays ``e_k``. If ``j = k``: run ``A`` adds
   ``e_k``, making ``x^A_k = x^B_k``, and run ``B`` adds ``e_i`` for its own vote ``i`` (or
   nothing), so the difference becomes ``e_i`` (or ``0``). So the numbers of votes differ by at
   most one; and the numbers of users who cast no vote below ``Gamma``
   (:attr:`VoteCounts.non_voters`) differ by at most one: ``u`` adds itself to them or casts a
   vote below ``Gamma``; in the second case the cascade keeps the difference on keys below
   ``Gamma`` in run ``B`` until at most one user ``v`` (with ``j = k``) finds ``k`` at ``Gamma`` in
   ``B`` and no other key of its below it; from then on the difference sits on a key with at
   least ``Gamma`` votes in both runs, whose voters cast no vote below ``Gamma`` in either run, and
   no user's status changes again (a user without a vote below ``Gamma`` in ``A`` has none in
   ``B``, since ``x^B >= x^A``).
3. **Release.** Keys with no vote are never released (``pi_0 = 0``), so the candidates are the
   keys with votes, and each key is released independently with probability ``pi`` of its count.
   Neighbouring final counts differ by one vote on one key ``k`` (or not at all): the outputs on
   the other keys have the same law, and on ``k`` the laws Bernoulli(``pi_n``) and
   Bernoulli(``pi_(n+1)``) satisfy ``pi_(n+1) <= e^eps pi_n + delta`` and ``1 - pi_n <= e^eps
   (1 - pi_(n+1)) + delta`` (the recursion, rounded down exactly; see
   :mod:`privhist.mechanisms.optimal_selection`) and the two other inequalities because ``pi``
   is nondecreasing. So for every fixed salt and priorities the release is ``(epsilon,
   delta)``-DP in both directions, and so is its mixture over them (the hockey-stick divergence
   is jointly convex; ``u``'s priority is drawn independently of everything else, and the
   salt's law is the same in both runs).
4. **Counts (optional).** With ``counts``, ``epsilon_s = (1 - count_share) epsilon`` goes to the
   selection and the rest, ``epsilon_c``, to noise on the number of users counted on each
   released key, each user counted on a uniform random subset of at most ``k_c =
   count_max_keys`` of the released keys it holds: a public key set on which ``u`` changes at
   most ``k_c`` counts by 1 (L1 norm ``k_c``, L2 norm ``sqrt(k_c)``). The noise
   (:mod:`~privhist.mechanisms.user_level._counts`) is discrete Laplace of scale ``k_c /
   epsilon_c`` (pure ``epsilon_c``-DP; the selection then keeps all of ``delta``) or discrete
   Gaussian ``N_Z(0, sigma2_c)`` with ``delta_c = delta / 2`` (the rest to the selection),
   ``(epsilon_c, delta_G(epsilon_c - 2 k_c / sigma2_c; sqrt(k_c / sigma2_c)))``-DP by the
   Gaussian-profile bound of :mod:`~privhist.mechanisms.user_level.cumulative` (item 4, one
   round); ``count_noise="auto"`` takes the one of smaller expected absolute error, a function
   of ``(epsilon_c, delta / 2, k_c)``. ``count_delta_share`` fixes the delta split instead (the
   user-level plan gives all its vote candidates one selection). Adaptive basic composition
   adds the two parts (:meth:`certified_delta`). Released counts are then clipped to at least
   1 (a released key is held by at least one user; post-processing).

Defaults (the key and user orders, the caps), chosen on ``anonymous-msweb.data`` and
``retail.dat`` and checked on ``anonymous-msweb.test`` and the retail households
(``benchmarks/bench_user_level.py``; expected keys released from the simulated votes, mean of 2
runs): users in increasing order of their number of keys (against a random order, at (1,
1e-8): msweb 183.1 against 177.3, retail 2,054 against 1,891); one public key order (against
each user's own random order: retail 2,054 against 1,600, msweb 183.1 against 182.8);
``cap_level = 0.1`` with the top cap (at (0.98, 1e-8), (0.98, 1e-5), (2.94, e^-10), levels 0.1
/ 0.03 / 0.01 / 0.001 with the top cap: retail 2,189 / 2,168 / 2,127 / 2,036, 3,858 / 3,753 /
3,620 / 3,375, 9,388 / 9,099 / 9,099 / 8,763; msweb 183.0 / 183.1 / 182.9 / 182.6, 204.0 /
203.9 / 203.6 / 202.7, 234.3 / 234.1 / 234.1 / 234.1; without the top cap, level 0.1: retail
2,180, 3,839, 9,136, msweb 176.3, 196.8, 226.2); a ladder of more caps (0.3, 0.1, 0.01, then
the top) gave retail 1,880, 3,566, 9,419 and msweb 183.4, 204.2, 234.3. With counts,
``count_share = 0.25`` and ``count_max_keys = 20`` (through the planner: the DP 0.9-quantile of
users' numbers of keys, at most 20): on msweb at the three budgets the shares 0.1 / 0.15 / 0.25 /
0.35 release 175 / 173 / 169 / 162, 197 / 197 / 192 / 184, 230 / 228 / 227 / 225 keys at count
MAE (Gaussian noise, 10 keys per user) 117 / 78 / 50 / 44, 76 / 55 / 41 / 31, 30 / 25 / 17 /
16; every share up to 0.35 keeps 0.9 of the best published selector's keys (158.4, 180.9,
211.5) and 0.25 is the middle of that range. The planner's count cap (the 0.9 quantile, where
it was ``min(plan cap, 20)``, 20 on msweb) and the noise of smaller expected absolute error
(discrete Laplace at 10 keys per user for the first two budgets) brought the default's count
MAE on msweb from 68.1 / 48.0 / 17.5 to 42.6 / 38.6 / 17.9, and on msweb.test from 61.9 / 44.9 /
15.6 to 46.5 / 36.3 / 12.1 (3 runs each), at the same keys.
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from privhist.accounting.composition import ApproxDPEvent
from privhist.core.budget import Budget
from privhist.core.constraints import naming_the_class
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.requests import Fields, Request, UserKeys, UserVotes
from privhist.core.validation import Constraint, delta_constraint, float_up
from privhist.core.version import LIBRARY
from privhist.core.weighted import VoteCounts, WeightedSource
from privhist.io.release import Release
from privhist.mechanisms.optimal_selection import OptimalSelection
from privhist.mechanisms.user_level._count_noise import COUNT_NOISES, CountNoise
from privhist.mechanisms.user_level._counts import count_statement

#: ``Gamma`` is the smallest count whose release probability is at least ``1 - cap_level``
DEFAULT_CAP_LEVEL = Fraction(1, 10)
#: with counts: the share of epsilon (and, below, of delta) given to the count release
DEFAULT_VOTE_COUNT_SHARE = 0.25
COUNT_DELTA_SHARE = Fraction(1, 2)
#: users are counted on at most this many released keys in the count release
DEFAULT_VOTE_COUNT_MAX_KEYS = 20


@runtime_checkable
class VoteSource(Protocol):
    """What :class:`VoteSelection` asks the data for: the votes of the rule (module notes) and,
    for counts, the user counts of released keys (as
    :meth:`privhist.core.weighted.WeightedSource.unit_counts`)."""

    def vote_counts(self, cap: int, top_cap: int) -> VoteCounts:
        """Run the vote rule with vote caps ``cap`` and ``top_cap`` (a fresh salt and fresh
        priorities)."""
        ...

    def unit_counts(self, keys: npt.ArrayLike, max_keys: int) -> Counts:
        """Users per key of ``keys``, each user counted on at most ``max_keys`` of them."""
        ...


def _pairs(users: npt.ArrayLike, keys: npt.ArrayLike, fn: str) -> tuple[Any, Any]:
    u, k = np.asarray(users), np.asarray(keys)
    if u.ndim != 1 or k.shape != u.shape:
        raise ValidationError(
            "keys", fn, f"a one-dimensional array as long as users ({u.shape})", k.shape
        )
    return u, k


def key_priorities(keys: npt.NDArray[Any], salt: bytes) -> npt.NDArray[np.uint64]:
    """The public order of keys: the first 8 bytes of BLAKE2b(``salt`` + the key's bytes), as
    an unsigned integer (a function of the key alone; integer keys hash their decimal digits,
    text keys their UTF-8 bytes, other keys their ``repr``).

    >>> key_priorities(np.array(["a", "b"]), bytes(16)).dtype
    dtype('uint64')
    """
    out = np.empty(keys.shape[0], dtype=np.uint64)
    for i, k in enumerate(keys.tolist()):
        if isinstance(k, str):
            b = k.encode("utf-8")
        elif isinstance(k, int | np.integer) and not isinstance(k, bool):
            b = str(int(k)).encode("ascii")
        else:
            b = repr(k).encode("utf-8")
        out[i] = int.from_bytes(hashlib.blake2b(salt + b, digest_size=8).digest(), "big")
    return out


def cast_votes(
    users: npt.ArrayLike,
    keys: npt.ArrayLike,
    *,
    cap: int,
    top_cap: int,
    rng: RandomSource,
) -> VoteCounts:
    """The vote counts of the rule (module notes) on (user, key) pairs (duplicates allowed).

    The reference implementation for one machine: one sort of the pairs, then one pass over the
    users in voting order (a Python loop over users; the work is linear in the pairs).

    Example:
        >>> from privhist.core.random import SeededRandom
        >>> v = cast_votes([1, 2, 2, 3, 3], ["a", "a", "b", "a", "b"], cap=1, top_cap=2,
        ...                rng=SeededRandom(0))
        >>> int(v.votes.sum()), v.non_voters  # "a" (user 1 alone), "b", then "a" again
        (3, 1)
    """
    fn = "cast_votes"
    u, k = _pairs(users, keys, fn)
    _, ucode = np.unique(u, return_inverse=True)
    klab, kcode = np.unique(k, return_inverse=True)
    return cast_coded_votes(ucode.ravel(), kcode.ravel(), klab, cap=cap, top_cap=top_cap, rng=rng)


def cast_coded_votes(
    user_codes: npt.ArrayLike,
    key_codes: npt.ArrayLike,
    key_labels: npt.NDArray[Any],
    *,
    cap: int,
    top_cap: int,
    rng: RandomSource,
) -> VoteCounts:
    """:func:`cast_votes` on pairs already coded, as an engine codes them with its table library:
    ``user_codes`` are the users' ranks among the distinct users in the order of their labels
    (``0`` to ``n - 1``, every rank present), and ``key_codes`` index ``key_labels``, the distinct
    keys in increasing order. The same codes as ``np.unique(..., return_inverse=True)`` give the
    same votes for a seed.

    >>> from privhist.core.random import SeededRandom
    >>> v = cast_coded_votes([0, 1, 1, 2, 2], [0, 0, 1, 0, 1], np.array(["a", "b"]), cap=1,
    ...                      top_cap=2, rng=SeededRandom(0))
    >>> int(v.votes.sum()), v.non_voters
    (3, 1)
    """
    fn = "cast_votes"
    cap = Constraint.integer(1).check(cap, "cap", fn)
    top_cap = Constraint.integer(cap).check(top_cap, "top_cap", fn)
    ucode, kcode = (np.asarray(c, dtype=np.int64) for c in _pairs(user_codes, key_codes, fn))
    n_keys = int(key_labels.shape[0])
    if ucode.size == 0:
        return VoteCounts(key_labels[:0], np.zeros(0, dtype=np.int64), 0, {"users": 0, "voters": 0})
    n_users = int(ucode.max()) + 1
    if (
        int(ucode.min()) < 0
        or int(kcode.min()) < 0
        or int(kcode.max()) >= n_keys
        or not np.bincount(ucode, minlength=n_users).all()
    ):
        raise ValidationError(
            "user_codes", fn, "user ranks 0..n-1, each present, and key codes below the keys", None
        )
    salt = rng.uint64(2).astype(">u8").tobytes()
    key_rank = np.empty(n_keys, dtype=np.int64)
    key_rank[np.lexsort((np.arange(n_keys), key_priorities(key_labels, salt)))] = np.arange(n_keys)
    # distinct pairs
    order = np.lexsort((kcode, ucode))
    ucode, kcode = ucode[order], kcode[order]
    fresh = np.r_[True, (ucode[1:] != ucode[:-1]) | (kcode[1:] != kcode[:-1])]
    ucode, kcode = ucode[fresh], kcode[fresh]
    degree = np.bincount(ucode, minlength=n_users).astype(np.int64)
    user_priority = rng.uint64(n_users)
    # voting order: degree, user priority, user label; within a user: the public key order
    order = np.lexsort((key_rank[kcode], ucode, user_priority[ucode], degree[ucode]))
    kc = kcode[order].tolist()
    uc = ucode[order]
    starts = [*np.flatnonzero(np.r_[True, uc[1:] != uc[:-1]]).tolist(), len(kc)]
    ballots = [kc[starts[b] : starts[b + 1]] for b in range(len(starts) - 1)]
    x, non_voters = votes_in_order(ballots, n_keys, cap=cap, top_cap=top_cap)
    voters = sum(x)
    votes = np.asarray(x, dtype=np.int64)
    has = votes > 0
    info = {"users": n_users, "pairs": int(ucode.shape[0]), "voters": voters}
    return VoteCounts(key_labels[has], votes[has], non_voters, info)


def votes_in_order(
    ballots: list[list[int]], n_keys: int, *, cap: int, top_cap: int
) -> tuple[list[int], int]:
    """The rule's loop: ``ballots[i]`` is the ``i``-th voter's key codes (``0 <= code <
    n_keys``, distinct) in the public key order; each voter votes for its first key below
    ``cap`` votes, or else for its first key below ``top_cap``. Returns the vote count of every
    key code and the number of voters with no key below ``cap``.

    >>> votes_in_order([[0], [0, 1], [0, 1], [0]], 2, cap=1, top_cap=2)
    ([2, 1], 2)
    """
    x = [0] * n_keys
    late = 0
    for ballot in ballots:
        for key in ballot:
            if x[key] < cap:
                x[key] += 1
                break
        else:
            late += 1
            for key in ballot:
                if x[key] < top_cap:
                    x[key] += 1
                    break
    return x, late


def bounded_unit_counts(
    users: npt.ArrayLike,
    keys: npt.ArrayLike,
    wanted: npt.ArrayLike,
    max_keys: int,
    rng: RandomSource,
) -> Counts:
    """Users per key of ``wanted``, each user counted on a uniformly random subset of at most
    ``max_keys`` of the keys of ``wanted`` it holds (user-level ``Counts``; 0 for keys nobody
    holds), as :meth:`privhist.core.weighted.WeightedSource.unit_counts`.

    >>> from privhist.core.random import SeededRandom
    >>> c = bounded_unit_counts([1, 1, 2, 3], [1, 2, 1, 9], [1, 2, 5], 2, SeededRandom(0))
    >>> c.keys.tolist(), c.counts.tolist()
    ([1, 2, 5], [2, 1, 0])
    """
    fn = "unit_counts"
    k_c = Constraint.integer(1).check(max_keys, "max_keys", fn)
    u, k = _pairs(users, keys, fn)
    want = np.unique(np.asarray(wanted))
    nb = Neighbouring.user(k_c, 1)
    counts = np.zeros(want.shape[0], dtype=np.int64)
    if want.size and u.size:
        inside = np.isin(k, want)
        u, k = u[inside], k[inside]
        if u.size:
            _, ucode = np.unique(u, return_inverse=True)
            kcode = np.searchsorted(want, k)
            ucode, kcode = ucode.astype(np.int64).ravel(), kcode.astype(np.int64).ravel()
            order = np.lexsort((kcode, ucode))
            ucode, kcode = ucode[order], kcode[order]
            fresh = np.r_[True, (ucode[1:] != ucode[:-1]) | (kcode[1:] != kcode[:-1])]
            ucode, kcode = ucode[fresh], kcode[fresh]
            pri = rng.uint64(int(ucode.shape[0]))
            order = np.lexsort((kcode, pri, ucode))
            ucode, kcode = ucode[order], kcode[order]
            starts = np.flatnonzero(np.r_[True, ucode[1:] != ucode[:-1]])
            sizes = np.diff(np.r_[starts, ucode.shape[0]])
            rank = np.arange(ucode.shape[0]) - np.repeat(starts, sizes)
            counts = np.bincount(kcode[rank < k_c], minlength=want.shape[0]).astype(np.int64)
    return Counts.from_arrays(want, counts, counts, neighbouring=nb, function=fn)


class PairsVoteSource:
    """Distinct (user, key) pairs held as arrays: a :class:`VoteSource` on one machine (and a
    degree histogram for the DP cap and the planner's choice,
    :meth:`privhist.core.weighted.WeightedSource.degree_histogram`).

    >>> from privhist.core.random import SeededRandom
    >>> src = PairsVoteSource([1, 1, 2], ["a", "b", "a"], SeededRandom(0))
    >>> src.degree_histogram([1, 2]).tolist()
    [1, 1, 0]
    """

    def __init__(
        self, users: npt.ArrayLike, keys: npt.ArrayLike, rng: RandomSource | None = None
    ) -> None:
        self.users, self.keys = _pairs(users, keys, "PairsVoteSource")
        self.rng = rng or SecureRandom()

    def vote_counts(self, cap: int, top_cap: int) -> VoteCounts:
        return cast_votes(self.users, self.keys, cap=cap, top_cap=top_cap, rng=self.rng)

    def unit_counts(self, keys: npt.ArrayLike, max_keys: int) -> Counts:
        return bounded_unit_counts(self.users, self.keys, keys, max_keys, self.rng)

    def degree_histogram(self, bounds: npt.ArrayLike) -> npt.NDArray[np.int64]:
        b = np.asarray(bounds, dtype=np.int64)
        if b.ndim != 1 or b.size == 0 or (np.diff(b) <= 0).any() or int(b[0]) < 1:
            raise ValidationError("bounds", "degree_histogram", "increasing positive integers", b)
        if self.users.size == 0:
            return np.zeros(b.size + 1, dtype=np.int64)
        pairs = np.unique(
            np.stack(
                [
                    np.unique(self.users, return_inverse=True)[1].ravel(),
                    np.unique(self.keys, return_inverse=True)[1].ravel(),
                ]
            ),
            axis=1,
        )
        degrees = np.bincount(pairs[0])
        degrees = degrees[degrees > 0]
        return np.bincount(np.searchsorted(b, degrees, side="left"), minlength=b.size + 1).astype(
            np.int64
        )


def vote_cap(selection: OptimalSelection, level: Fraction) -> int:
    """The smallest count ``n`` with ``pi_n >= 1 - level`` (exact: on the integer grid; level 0
    gives the top cap, ``pi_n = 1``)."""
    one = 1 << selection.grid_bits
    need = one - (level.numerator * one) // level.denominator
    n = 0
    while selection.reporting_numerator(n) < need:
        n += 1
    return max(n, 1)


class VoteSelection:
    """One vote per user, cast in turn for the user's first key below a cap in a public random
    key order; keys released by optimal selection on their votes (module notes: rule, proof,
    defaults).

    Three hundred users: 150 hold ``"a"`` alone, 150 hold ``"a"`` and ``"b"``; ``"a"`` reaches the
    cap and the later users vote for ``"b"``:

    >>> from privhist import SeededRandom
    >>> users = list(range(300)) + list(range(150, 300))
    >>> keys = ["a"] * 300 + ["b"] * 150
    >>> m = VoteSelection(1.0, 1e-6)
    >>> m.cap, m.top_cap, m.certified_delta() <= 1e-6
    (16, 28, True)
    >>> m.release(PairsVoteSource(users, keys, SeededRandom(0)), SeededRandom(1)).keys
    array(['a', 'b'], dtype='<U1')
    """

    name: ClassVar[str] = "vote-selection"
    summary: ClassVar[str] = (
        "one vote per user, cast in turn for its first key below a cap in a public random key "
        "order; optimal selection on the votes"
    )
    requires_delta: ClassVar[bool] = True

    @classmethod
    def constraints(cls) -> dict[str, Constraint]:
        share = Constraint.real(0, 1, open_low=True, open_high=True)
        return {
            "epsilon": Constraint.real(0, open_low=True),
            "delta": delta_constraint(positive=True),
            "counts": Constraint.flag(),
            "count_share": share,
            "count_max_keys": Constraint.integer(1),
            "count_noise": Constraint.one_of(*COUNT_NOISES),
            "count_delta_share": Constraint.rational(0, 1, open_high=True),
            "cap_level": share,
            "confidence": share,
        }

    @naming_the_class
    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        counts: bool = False,
        count_share: float = DEFAULT_VOTE_COUNT_SHARE,
        count_max_keys: int = DEFAULT_VOTE_COUNT_MAX_KEYS,
        count_noise: str = "auto",
        count_delta_share: Fraction | float | None = None,
        cap_level: Fraction | float = DEFAULT_CAP_LEVEL,
        confidence: float = 0.95,
    ) -> None:
        fn = type(self).__name__
        declared = self.constraints()

        def check(name: str, value: Any) -> Any:
            return declared[name].check(value, name, fn)

        self.epsilon: float = check("epsilon", epsilon)
        self.delta: float = check("delta", delta)
        self.counts: bool = check("counts", counts)
        self.count_share: float = check("count_share", count_share)
        self.count_max_keys: int = check("count_max_keys", count_max_keys)
        self.cap_level = Fraction(check("cap_level", cap_level))
        self.confidence: float = check("confidence", confidence)
        eps, dlt = Fraction(self.epsilon), Fraction(self.delta)
        #: the count release's noise (None when keys only; module notes, item 4)
        self.count_noise: CountNoise | None = None
        if counts:
            noise = check("count_noise", count_noise)
            eps_s = float(eps * (1 - Fraction(self.count_share)))
            eps_c = float(eps - Fraction(eps_s))
            while Fraction(eps_s) + Fraction(eps_c) > eps:  # the parts add up to at most eps
                eps_c = math.nextafter(eps_c, 0.0)

            def split(share: Fraction) -> tuple[float, float]:
                d_s = float(dlt * (1 - share))
                d_c = float(dlt - Fraction(d_s))
                while Fraction(d_s) + Fraction(d_c) > dlt:
                    d_c = math.nextafter(d_c, 0.0)
                return d_s, d_c

            chosen: CountNoise | None = None
            if count_delta_share is not None:
                share = Fraction(check("count_delta_share", count_delta_share))
            else:  # Laplace counts need no delta: the selection keeps all of it
                chosen = CountNoise.of(
                    eps_c, split(COUNT_DELTA_SHARE)[1], self.count_max_keys, noise
                )
                share = Fraction(0) if chosen.sigma2 is None else COUNT_DELTA_SHARE
            delta_s, delta_c = split(share)
            if chosen is None:  # else final: its delta_c is the split's (Laplace needs none)
                chosen = CountNoise.of(eps_c, delta_c, self.count_max_keys, noise)
            self.count_noise = chosen
            self.epsilon_counts, self.delta_counts = eps_c, delta_c
        else:
            eps_s, delta_s = self.epsilon, self.delta
        self.epsilon_selection, self.delta_selection = eps_s, delta_s
        self.selection = OptimalSelection(eps_s, delta_s, keys_only=True)
        self.cap = vote_cap(self.selection, self.cap_level)
        self.top_cap = vote_cap(self.selection, Fraction(0))

    # -- guarantee --------------------------------------------------------------------------

    @property
    def neighbouring(self) -> Neighbouring:
        """Add or remove one user with any number of keys (and, with counts, counted on at most
        ``count_max_keys`` released keys)."""
        return Neighbouring.user(self.count_max_keys if self.counts else 1, 1)

    @property
    def count_sigma2(self) -> Fraction | None:
        """The count noise's variance when it is discrete Gaussian (None otherwise)."""
        return None if self.count_noise is None else self.count_noise.sigma2

    def count_delta(self) -> float:
        """The certified delta of the count release at ``epsilon_counts`` (item 4), rounded up:
        0 for discrete Laplace counts."""
        return 0.0 if self.count_noise is None else self.count_noise.delta

    def certified_delta(self) -> float:
        """``delta_s + delta_counts`` at ``epsilon_s + epsilon_counts <= epsilon`` (items 3, 4)."""
        return float_up(Fraction(self.delta_selection) + Fraction(self.count_delta()))

    def event(self) -> ApproxDPEvent:
        """The release as a privacy event: ``(epsilon, certified delta)``-DP."""
        return ApproxDPEvent(self.epsilon, self.certified_delta())

    def guarantee(self) -> Budget:
        return Budget(self.epsilon, self.certified_delta())

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "vote_cap": self.cap,
            "top_vote_cap": self.top_cap,
            "cap_level": float(self.cap_level),
            "order": (
                "users by number of distinct keys, then a random priority; each votes for its "
                "first key below the cap in a public random order of keys (salted hash)"
            ),
            "selection_epsilon": self.epsilon_selection,
            "selection_delta": self.delta_selection,
            "votes_released_with_probability_one_half": self.votes_at(0.5),
            "certified_delta": self.certified_delta(),
            "noise": "none on the votes (optimal selection)",
        }
        if self.count_noise is not None:
            out.update(
                {
                    "count_share": self.count_share,
                    "count_max_keys": self.count_max_keys,
                    "count_epsilon": self.epsilon_counts,
                    "count_delta": self.count_delta(),
                    **self.count_noise.parameters(),
                }
            )
        return out

    # -- planning ---------------------------------------------------------------------------

    def reporting_probability(self, max_votes: int) -> npt.NDArray[np.float64]:
        """``pi_v`` for ``v = 0..max_votes`` (floats, for planning)."""
        return self.selection.reporting_probability(max_votes)

    def votes_at(self, level: float) -> int:
        """The fewest votes released with probability at least ``level``."""
        p = self.reporting_probability(self.top_cap)
        hit = np.flatnonzero(p >= level)
        return int(hit[0]) if hit.size else self.top_cap

    # -- releasing --------------------------------------------------------------------------

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        """The votes cast under this mechanism's caps (:class:`~privhist.core.requests.
        UserVotes`) and, with counts, the users' keys for the count step
        (:class:`~privhist.core.requests.UserKeys`; :mod:`privhist.mechanisms.releasable`)."""
        votes = UserVotes(fields, self.cap, self.top_cap)
        return (votes, UserKeys(fields)) if self.counts else (votes,)

    def draw(self, answers: Any, rng: RandomSource) -> Release:
        """The release from the engine's answers (:meth:`release_votes`)."""
        source = answers.of(UserKeys) if self.counts else None
        return self.release_votes(answers.of(UserVotes), source, rng)

    def release(self, source: VoteSource, rng: RandomSource | None = None) -> Release:
        """Select keys from ``source`` (and count them when ``counts``); ``rng`` draws the
        release (``SecureRandom()`` when None), the source its salt and users' priorities."""
        fn = type(self).__name__
        if not isinstance(source, VoteSource):
            raise ValidationError("source", fn, "a VoteSource", type(source).__name__)
        return self.release_votes(source.vote_counts(self.cap, self.top_cap), source, rng)

    def release_votes(
        self,
        votes: VoteCounts,
        source: VoteSource | WeightedSource | None,
        rng: RandomSource | None = None,
    ) -> Release:
        """The release from vote counts already cast with this mechanism's caps (``source``
        answers the count step's unit counts: a :class:`VoteSource` or a
        :class:`~privhist.core.weighted.WeightedSource`; None when keys only)."""
        fn = type(self).__name__
        if rng is None:
            rng = SecureRandom()
        if not isinstance(rng, RandomSource):
            raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
        if not isinstance(votes, VoteCounts) or (
            votes.votes.size and int(votes.votes.max()) > self.top_cap
        ):
            raise ValidationError(
                "votes", fn, f"VoteCounts cast with top cap {self.top_cap}", votes
            )
        keep = self.selection.keep(votes.votes, rng)
        keys = np.sort(votes.keys[keep], kind="stable")
        info = dict(votes.info)
        columns: dict[str, Any] = {}
        meta = self.metadata(rng)
        if self.count_noise is not None:
            if not isinstance(source, VoteSource | WeightedSource):
                raise ValidationError(
                    "source", fn, "a VoteSource or WeightedSource for the counts", source
                )
            counted = source.unit_counts(keys, self.count_max_keys)
            noisy = counted.counts + self.count_noise.draw(len(counted), rng)
            columns = self.count_noise.columns(noisy, self.confidence)
            meta["counts"] = count_statement(
                self.count_max_keys, self.confidence, self.count_noise.name
            )
            info["records_counted"] = int(counted.counts.sum())
        meta["released_keys"] = int(keys.shape[0])
        return Release(keys=keys, metadata=meta, diagnostics=info, **columns)

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        nb = "user-level (each user casts one vote among all its keys" + (
            f"; counted on at most {self.count_max_keys} released keys)" if self.counts else ")"
        )
        g = self.guarantee()
        meta: dict[str, Any] = {
            "mechanism": self.name,
            "parameters": self.parameters(),
            "guarantee": {
                "epsilon": g.epsilon,
                "delta": g.delta,
                "neighbouring": nb,
                "statement": f"{g} under {nb} neighbours",
            },
            "confidence": self.confidence,
            "library": LIBRARY,
        }
        if rng is not None:
            meta["randomness"] = rng.to_dict()
            if not rng.private:
                meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return meta
