"""Shuffle-model baseline: Bernoulli noise messages (Balcer & Cheu, ITC 2020).

Bharadwaj & Cormode (AISTATS 2022), Section 5, compare with "a shuffling-approach which adds
Bernoulli noise (Balcer and Cheu, 2020)": every sampled client sends its item and, for each bucket
of the public domain, one extra message naming that bucket with probability ``q``. The shuffler
forwards the multiset of messages, so the analyst sees, for every bucket ``j``,

    Y_j = c_j + Binomial(n, q)      (independently over buckets),

where ``c_j`` is the number of clients holding ``j`` and ``n`` the number of clients (the
aggregate is exactly the per-bucket message count; :meth:`ShuffleBernoulli.client_messages`
simulates the messages themselves for small inputs). ``Y_j - n q`` is unbiased for ``c_j``.

**Neighbours.** ``n`` (``n_clients``) is public. Add/remove one client is read as in the paper's
cohort scheme: a client without an item still sends its noise messages (an abstaining client),
so a neighbouring step moves one bucket's count by one. Replacing one client's item moves two
buckets; each bucket then gets ``(eps / 2, delta / 2)`` and basic composition (Dwork & Roth 2014,
Theorem 3.16) gives (eps, delta) — Balcer & Cheu's own histogram theorem composes the same way.

**Calibration** (per bucket, at ``(eps_b, delta_b)``):

* ``"balcer-cheu"``: the binary-sum protocol of Balcer & Cheu, Section 3: each user's noise bit is
  1 with probability ``p = 1 - 50 ln(2 / delta_b) / (eps_b**2 n)``, for ``eps_b, delta_b <= 1``
  and ``n >= 100 ln(2 / delta_b) / eps_b**2``; privacy follows from their smoothness lemma for
  Binomial(n, 1 - p). We send the *complement* bits, ``q = 1 - p``: their bucket output is
  ``c + Binomial(n, p) = c + n - Z`` with ``Z ~ Binomial(n, q)`` in law, and the bijection
  ``y -> 2c + n + 1 - y`` maps their neighbouring pair ``(c + n - Z, c + n + 1 - Z)`` onto ours,
  ``(c + 1 + Z, c + Z)``, swapped. Both directions of the hockey-stick divergence are checked, so
  the privacy profile is the same, while only about ``q n`` noise messages are sent per bucket
  instead of ``(1 - q) n``. (Their paper is not in this repository; the constants are quoted from
  a reading of its Section 3 and every chosen ``q`` is verified exactly, see below.)
* ``"exact"`` (default): the smallest ``q`` on the grid ``k / 2**24`` (``q <= 1/2``) for which
  the exact privacy profile of the pair ``(X, X + 1)``, ``X ~ Binomial(n, q)``, is at most
  ``delta_b`` at ``eps_b``. Needs no condition on ``n`` other than feasibility (``q = 1/2``
  must suffice).

**Exact profile.** With ``b(y) = Pr[X = y]``, ``b(y - 1) / b(y) = y (1 - q) / ((n - y + 1) q)``
increases in ``y``, so the privacy loss of ``X + 1`` against ``X`` is monotone and

    H(X + 1 || X) = sum_{y >= y*} (b(y - 1) - e^eps b(y)),
    H(X || X + 1) = sum_{y <= y'} (b(y) - e^eps b(y - 1)),

over the outputs where the terms are positive (``y* > e^eps q (n + 1) / (1 - q + e^eps q)``,
``y' < q (n + 1) / (q + e^eps (1 - q))``). :func:`bucket_delta` sums them in 256-bit
arithmetic with a rational lower bound for ``e^eps`` and a geometric bound on the truncated tail
(added, so the result is an upper bound up to the 2**-240 relative error of the arithmetic;
``delta_exact`` is it rounded up to a float);
the tests compare it with :func:`privhist.accounting.profile.hockey_stick` on the exact rational
distributions. Every calibration is re-checked with :func:`bucket_delta` at construction, and
``delta_exact`` reports the value.

Findings (per-bucket delta = 1e-8, exact profile): for n = 10**5 clients at eps = 1, Balcer &
Cheu's ``q = 0.0091`` has ``delta_exact`` about 2e-112, while the exact calibration needs only
``q = 0.00047`` (noise standard deviation 7.0 instead of 30.8); at eps = 0.5, ``q = 0.036``
(delta about 7e-150) against ``0.0013`` (std 11.6 against 60.7). At eps = 0.1 their condition
asks for ``n >= 191139`` clients, more than the sample of the paper's experiments at any
eps <= 1 (``n = 10**6`` times the sampling rate ``(1 - e^-eps) / 6``), while the exact calibration
exists (``q = 0.022`` for ``n = 10**5``, std 47). The paper's constants are thus very loose; the
default here is the exact calibration.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, ClassVar

import mpmath
import numpy as np
import numpy.typing as npt
from mpmath import libmp

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource
from privhist.core.validation import delta_constraint, float_up
from privhist.federated.baselines._items import (
    DOMAIN_SIZE,
    check_items,
    histogram,
)
from privhist.noise import bernoulli_rational, binomial, rational_at_least

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_NAME = "ShuffleBernoulli"
#: grid of the exact calibration: q = k / 2**24
GRID_BITS = 24
#: working precision of :func:`bucket_delta`
PREC = 256
#: truncated tails are summed until their geometric bound is below this
_TAIL = mpmath.mpf(2) ** -300
CALIBRATIONS = ("exact", "balcer-cheu")


def bucket_delta(n: int, q: Fraction, epsilon: Any) -> Any:
    """``max(H(X + 1 || X), H(X || X + 1))`` at ``e^epsilon`` for ``X ~ Binomial(n, q)``.

    The exact privacy profile of one bucket of :class:`ShuffleBernoulli` (module notes), as an
    ``mpmath.mpf`` computed with :data:`PREC` bits; truncated tails are bounded geometrically and
    added, and ``e^epsilon`` is replaced by a slightly smaller number, so rounding aside the value
    is an upper bound.

    Args:
        n: Number of noise senders, ``>= 1``.
        q: Noise probability, a Fraction in ``(0, 1)``.
        epsilon: ``>= 0`` (float or Fraction).

    >>> float(bucket_delta(1, Fraction(1, 2), 0))  # X in {0, 1}, X + 1 in {1, 2}
    0.5
    """
    with mpmath.workprec(PREC):
        qm = mpmath.mpf(q.numerator) / q.denominator
        e = mpmath.exp(mpmath.mpf(Fraction(epsilon).numerator) / Fraction(epsilon).denominator)
        e *= 1 - mpmath.mpf(2) ** (16 - PREC)
        up = _upper(n, qm, e)
        low = _lower(n, qm, e)
        return max(up, low)


def _float_up(value: Any) -> float:
    """An ``mpmath.mpf`` rounded up to a float (a reported delta never understates)."""
    return float_up(Fraction(*libmp.to_rational(value._mpf_)))  # no re-rounding to 53 bits


def _pmf(n: int, qm: Any, y: int) -> Any:
    if y < 0 or y > n:
        return mpmath.mpf(0)
    log_b = (
        mpmath.loggamma(n + 1)
        - mpmath.loggamma(y + 1)
        - mpmath.loggamma(n - y + 1)
        + y * mpmath.log(qm)
        + (n - y) * mpmath.log1p(-qm)
    )
    return mpmath.exp(log_b)


def _upper(n: int, qm: Any, e: Any) -> Any:
    """``H(X + 1 || X) = sum_{y >= y*} b(y - 1) - e b(y)`` (terms positive there)."""
    y = int(mpmath.floor(e * qm * (n + 1) / (1 - qm + e * qm))) + 1
    y = max(y, 0)
    prev = _pmf(n, qm, y - 1)  # b(y - 1)
    total = mpmath.mpf(0)
    while y <= n + 1:
        cur = _pmf_next(n, qm, y, prev)  # b(y)
        total += prev - e * cur
        # b is decreasing from here (y beyond the mode); remaining sum of b(y) over y' > y is at
        # most b(y) r / (1 - r) with r = b(y + 1) / b(y), which only decreases
        if y > n:
            break
        r = (n - y) * qm / ((y + 1) * (1 - qm))
        if r < 1:
            bound = cur / (1 - r)
            if bound < _TAIL:
                return total + bound
        prev = cur
        y += 1
    return total


def _lower(n: int, qm: Any, e: Any) -> Any:
    """``H(X || X + 1) = sum_{y <= y'} b(y) - e b(y - 1)`` (terms positive there)."""
    y = int(mpmath.ceil(qm * (n + 1) / (qm + e * (1 - qm)))) - 1
    y = min(y, n)
    if y < 0:
        return mpmath.mpf(0)
    cur = _pmf(n, qm, y)
    total = mpmath.mpf(0)
    while y >= 0:
        prev = _pmf_prev(n, qm, y, cur)  # b(y - 1)
        total += cur - e * prev
        if y == 0:
            break
        # going down, b(y - 2) / b(y - 1) = (y - 1)(1 - q) / ((n - y + 2) q) decreases with y
        rho = (y - 1) * (1 - qm) / ((n - y + 2) * qm)
        if rho < 1:
            bound = prev / (1 - rho)
            if bound < _TAIL:
                return total + bound
        cur = prev
        y -= 1
    return total


def _pmf_next(n: int, qm: Any, y: int, prev: Any) -> Any:
    """``b(y)`` from ``b(y - 1)``."""
    if y > n:
        return mpmath.mpf(0)
    if y == 0:
        return _pmf(n, qm, 0)
    return prev * (n - y + 1) * qm / (y * (1 - qm))


def _pmf_prev(n: int, qm: Any, y: int, cur: Any) -> Any:
    """``b(y - 1)`` from ``b(y)``."""
    if y == 0:
        return mpmath.mpf(0)
    if y > n:
        return _pmf(n, qm, y - 1)
    return cur * y * (1 - qm) / ((n - y + 1) * qm)


def _delta_float(n: int, q: float, epsilon: float) -> float:
    """Float version of :func:`bucket_delta` for the search (scipy, log-space pmf)."""
    from scipy import stats

    sd = math.sqrt(n * q * (1 - q))
    lo = max(0, int(n * q - 40 * sd - 50))
    hi = min(n + 1, int(n * q + 40 * sd + 50))
    ys = np.arange(lo, hi + 1)
    b = np.exp(stats.binom.logpmf(ys, n, q))
    b_prev = np.exp(stats.binom.logpmf(ys - 1, n, q))
    e = math.exp(epsilon)
    up = np.clip(b_prev - e * b, 0, None).sum()
    down = np.clip(b - e * b_prev, 0, None).sum()
    return float(max(up, down))


@functools.lru_cache(maxsize=256)
def exact_noise_probability(n: int, epsilon: float, delta: float) -> Fraction | None:
    """Smallest ``q = k / 2**24 <= 1/2`` with ``bucket_delta(n, q, epsilon) <= delta``.

    ``None`` when even ``q = 1/2`` does not suffice. A float bisection finds the candidate; the
    result is confirmed (and moved up the grid if needed) with :func:`bucket_delta`.
    """
    top = 1 << (GRID_BITS - 1)
    if bucket_delta(n, Fraction(1, 2), epsilon) > delta:
        return None
    lo, hi = 0, top  # delta(lo / 2**24) > delta (or lo = 0), delta(hi / 2**24) <= delta
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _delta_float(n, mid / (1 << GRID_BITS), epsilon) > delta * (1 - 1e-9):
            lo = mid
        else:
            hi = mid
    k = hi
    step = max(1, k >> 20)
    while k < top and bucket_delta(n, Fraction(k, 1 << GRID_BITS), epsilon) > delta:
        k = min(top, k + step)
        step *= 2
    return Fraction(k, 1 << GRID_BITS)


def balcer_cheu_noise_probability(n: int, epsilon: float, delta: float) -> Fraction:
    """``50 ln(2 / delta) / (epsilon**2 n)`` rounded up to a rational (denominator <= 2**40).

    Raises:
        ValidationError: ``epsilon > 1``, or ``n < 100 ln(2 / delta) / epsilon**2`` (the
            conditions of Balcer & Cheu's theorem).
    """
    if epsilon > 1:
        raise ValidationError(
            "epsilon", _NAME, "<= 1 per bucket for the Balcer-Cheu calibration", epsilon
        )
    need = 100 * math.log(2 / delta) / epsilon**2
    if n < need:
        raise ValidationError(
            "n_clients",
            _NAME,
            f">= 100 ln(2/delta) / eps**2 = {math.ceil(need)} for the Balcer-Cheu calibration "
            f"at per-bucket (eps, delta) = ({epsilon:.6g}, {delta:.3g})",
            n,
        )
    q = 50 * math.log(2 / delta) / (epsilon**2 * n)
    return rational_at_least(q * (1 + 1e-12), 1 << 40)


class ShuffleBernoulli(Declared):
    """Shuffle-model histogram with Bernoulli noise messages from every client.

    Args:
        epsilon: Privacy parameter, > 0.
        delta: In (0, 1).
        n_clients: Number of clients that send noise (public), ``>= 1``. ``estimate`` accepts at
            most this many items; the others are abstaining clients (noise only).
        domain_size: Number of buckets ``B`` (public), in ``[1, 2**26]``.
        neighbouring: Add/remove one client (default; one bucket moves) or replace one client's
            item (two buckets move).
        calibration: ``"exact"`` (default) or ``"balcer-cheu"`` (module notes).

    >>> from privhist.core.random import SeededRandom
    >>> m = ShuffleBernoulli(1.0, 1e-6, 10_000, 8, calibration="balcer-cheu")
    >>> round(float(m.noise_probability), 4), bool(m.delta_exact <= 1e-6)
    (0.0725, True)
    >>> m.estimate(np.array([1, 2, 2]), SeededRandom(0)).shape
    (8,)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        "epsilon": Constraint.real(0, open_low=True),
        "delta": delta_constraint(positive=True),
        "n_clients": Constraint.integer(1),
        "domain_size": DOMAIN_SIZE,
        "calibration": Constraint.one_of(*CALIBRATIONS),
    }

    def __init__(
        self,
        epsilon: float,
        delta: float,
        n_clients: int,
        domain_size: int,
        *,
        neighbouring: Neighbouring | None = None,
        calibration: str = "exact",
    ) -> None:
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.delta: float = self.check_parameter("delta", delta)
        self.n_clients: int = self.check_parameter("n_clients", n_clients)
        self.domain_size: int = self.check_parameter("domain_size", domain_size)
        self.neighbouring = neighbouring if neighbouring is not None else Neighbouring.add_remove()
        if not isinstance(self.neighbouring, Neighbouring) or self.neighbouring.relation not in (
            Relation.ADD_REMOVE,
            Relation.REPLACE,
        ):
            raise ValidationError(
                "neighbouring", _NAME, "add/remove or replace neighbours", neighbouring
            )
        self.calibration: str = self.check_parameter("calibration", calibration)
        l0 = self.neighbouring.l0_sensitivity
        self.bucket_epsilon = self.epsilon / l0
        self.bucket_delta = self.delta / l0
        q: Fraction | None
        if calibration == "balcer-cheu":
            q = balcer_cheu_noise_probability(
                self.n_clients, self.bucket_epsilon, self.bucket_delta
            )
        else:
            q = exact_noise_probability(self.n_clients, self.bucket_epsilon, self.bucket_delta)
            if q is None:
                raise ValidationError(
                    "n_clients",
                    _NAME,
                    "large enough that Binomial(n_clients, 1/2) noise meets the per-bucket "
                    f"(eps, delta) = ({self.bucket_epsilon:.6g}, {self.bucket_delta:.3g})",
                    n_clients,
                )
        if q >= 1:
            raise ValidationError("n_clients", _NAME, "large enough that q < 1", n_clients)
        self.noise_probability: Fraction = q
        self.delta_exact = _float_up(bucket_delta(self.n_clients, q, self.bucket_epsilon))
        if self.delta_exact > self.bucket_delta:
            raise ValidationError(
                "calibration",
                _NAME,
                f"a noise level meeting delta {self.bucket_delta:.3g} per bucket "
                f"(q = {float(q):.6g} gives {self.delta_exact:.3g})",
                calibration,
            )

    def guarantee(self) -> Budget:
        """``(eps, delta)``: per bucket ``(eps_b, delta_exact)``, composed over the ``l0`` buckets
        one neighbouring step moves."""
        return guarantee_of(self.event())

    def event(self) -> ApproxDPEvent:
        """Per bucket ``(eps_b, delta_exact)``, on each of the ``l0`` buckets one neighbouring
        step moves (basic composition of them is the guarantee; the accountant may find more at
        another delta)."""
        return ApproxDPEvent(
            self.bucket_epsilon, self.delta_exact, self.neighbouring.l0_sensitivity
        )

    def shuffled_counts(self, items: Any, rng: RandomSource) -> I64:
        """Per-bucket message counts the analyst sees: ``c_j + Binomial(n_clients, q)``."""
        x = self._items(items, "ShuffleBernoulli.shuffled_counts")
        noise = binomial(np.full(self.domain_size, self.n_clients), self.noise_probability, rng)
        return histogram(x, self.domain_size) + noise

    def client_messages(self, items: Any, rng: RandomSource) -> I64:
        """Every message of every client (item first, then noise buckets), shuffled.

        Simulates the protocol message by message (``n_clients x domain_size`` Bernoulli draws);
        meant for small inputs and tests. Clients ``len(items) .. n_clients - 1`` abstain and send
        noise only.
        """
        x = self._items(items, "ShuffleBernoulli.client_messages")
        q = self.noise_probability
        bits = bernoulli_rational(
            q.numerator, q.denominator, rng, size=(self.n_clients, self.domain_size)
        )
        noise = np.nonzero(bits)[1].astype(np.int64)
        messages = np.concatenate((x, noise))
        order = rng.uniform_below(1 << 62, messages.shape[0]).argsort(kind="stable")
        return messages[order]

    def decode(self, counts: Any) -> F64:
        """Unbiased estimates ``Y_j - n_clients q`` from per-bucket message counts."""
        arr = np.asarray(counts)
        if arr.shape != (self.domain_size,) or arr.dtype.kind not in "iu":
            raise ValidationError(
                "counts",
                "ShuffleBernoulli.decode",
                f"{self.domain_size} integers",
                f"shape {arr.shape}, dtype {arr.dtype}",
            )
        return arr.astype(np.float64) - float(self.n_clients * self.noise_probability)

    def estimate(self, items: Any, rng: RandomSource) -> F64:
        """Unbiased estimates of the per-bucket counts among the clients holding ``items``."""
        return self.decode(self.shuffled_counts(items, rng))

    def noise_variance(self) -> float:
        """``n q (1 - q)``: the variance of every bucket's estimate."""
        q = self.noise_probability
        return float(self.n_clients * q * (1 - q))

    def parameters(self) -> dict[str, Any]:
        """Public parameters for reports and experiment tables."""
        return {
            "mechanism": "shuffle-bernoulli",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "n_clients": self.n_clients,
            "domain_size": self.domain_size,
            "neighbouring": self.neighbouring.relation.value,
            "calibration": self.calibration,
            "noise_probability": float(self.noise_probability),
            "delta_exact_per_bucket": self.delta_exact,
        }

    def _items(self, items: Any, function: str) -> I64:
        x = check_items(items, self.domain_size, function)
        if x.shape[0] > self.n_clients:
            raise ValidationError(
                "items", function, f"at most n_clients = {self.n_clients} items", x.shape[0]
            )
        return x
