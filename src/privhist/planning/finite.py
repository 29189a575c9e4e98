"""The bounded geometric mechanism written out in integers, so it can be checked by hand.

:func:`plan_bounded_geometric` reports, for ``GeoSample_{n, eps}`` (Balcer & Vadhan, Theorem 4.5;
Algorithm 2 at the rounded ``eps~``) and one true count ``c``, every number a reader needs to
verify the released distribution without trusting the code:

* ``K = ceil(log2(2 / eps))``, ``alpha = 2**K / (2**K + 1)`` and ``eps~ = 2 ln(1 + 2**-K)``;
* the common denominator ``d = (2**K + 1)**(n - 1) (2**(K + 1) + 1)``;
* the integers ``d F_c(z)`` for ``z = 0..n`` (Definition 4.3 at count ``c``): the sampler outputs
  the smallest ``z`` with ``d F_c(z) >= u`` for ``u`` uniform in ``[1, d]`` (Lemma 2.7);
* the pmf as exact fractions ``"a/b"``, and the guarantee.

With ``p = 2**K`` and ``q = p + 1`` the integers are ``d F_c(z) = p**(c - z) q**(n - c + z)`` for
``z < c``, ``d - p**(z - c + 1) q**(n - 1 - z + c)`` for ``c <= z < n`` and ``d`` at ``z = n``.

Sizes. ``d`` has about ``n log2(2**K + 1)`` bits; the table is printable (Python converts at most
4300 decimal digits per integer by default) only for moderate ``n``, which is the point of a
hand check. Larger ``n`` is refused with the largest ``n`` that fits.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from privhist.core.errors import ValidationError
from privhist.core.validation import exact_fraction
from privhist.mechanisms.finite._exact import fraction_str
from privhist.mechanisms.finite.geometric import GeoSample, counting_k

__all__ = ["MAX_DIGITS", "MAX_TABLE_DIGITS", "plan_bounded_geometric"]

#: largest number of decimal digits of d (Python's default int-to-str limit)
MAX_DIGITS = 4300
#: largest total number of digits in the scaled CDF table
MAX_TABLE_DIGITS = 2_000_000

_FN = "plan_bounded_geometric"


def plan_bounded_geometric(epsilon: Any, n: int, true_count: int) -> dict[str, Any]:
    """The exact distribution of ``GeoSample_{n, epsilon}`` at ``true_count``.

    Args:
        epsilon: The counting-query parameter ``eps in (0, 1]`` of Theorem 4.5 (a number or a
            string such as ``"1/10"``); the mechanism is ``(eps~/2, 0)``-DP for counting queries.
        n: The public bound: outputs lie in ``[0, n]``; ``n >= 1``.
        true_count: The count ``c in [0, n]`` whose output distribution is written out.

    Returns:
        A JSON-friendly dict with ``parameters`` (``K``, ``alpha``, ``ratio``, ...),
        ``denominator`` (``d``, an int), ``scaled_cdf`` (the ints ``d F_c(z)``, ``z = 0..n``),
        ``pmf`` (fraction strings), ``guarantee`` and ``accuracy``.

    >>> plan = plan_bounded_geometric(1, 3, 1)
    >>> plan["parameters"]["K"], plan["denominator"], plan["scaled_cdf"]
    (1, 45, [18, 27, 33, 45])
    >>> plan["pmf"]
    ['2/5', '1/5', '2/15', '4/15']
    """
    k = counting_k(epsilon, _FN)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationError("n", _FN, "an integer >= 1 (with n = 0 the only output is 0)", n)
    if isinstance(true_count, bool) or not isinstance(true_count, int):
        raise ValidationError("true_count", _FN, f"an integer in [0, n] = [0, {n}]", true_count)
    if not 0 <= true_count <= n:
        raise ValidationError("true_count", _FN, f"an integer in [0, n] = [0, {n}]", true_count)
    q = (1 << k) + 1
    digits_per_n = math.log10(q)
    digits = (n - 1) * digits_per_n + math.log10(2 * q - 1) + 1
    if digits > MAX_DIGITS or (n + 1) * digits > MAX_TABLE_DIGITS:
        biggest = _largest_n(digits_per_n, q)
        raise ValidationError(
            "n",
            _FN,
            f"at most {biggest} at K={k} for a printed table (d would have about "
            f"{int(digits)} digits)",
            n,
        )
    g = GeoSample.from_k(n, k)
    eps = exact_fraction(epsilon, _FN, "epsilon", "a rational number in (0, 1]")
    d = g.denominator
    scaled = [g.scaled_cdf(true_count, z) for z in range(n + 1)]
    pmf = [Fraction(scaled[0], d)] + [
        Fraction(scaled[z] - scaled[z - 1], d) for z in range(1, n + 1)
    ]
    ratio = g.ratio
    beta = Fraction(1, 20)
    return {
        "mechanism": "bounded-geometric",
        "reference": "Balcer & Vadhan, Theorem 4.5 (GeoSample); Algorithm 2 at eps~",
        "parameters": {
            "epsilon": float(eps),
            "n": n,
            "true_count": true_count,
            "K": k,
            "alpha": fraction_str(Fraction(1 << k, q)),
            "ratio": fraction_str(ratio),
            "epsilon_tilde": g.epsilon_tilde,
        },
        "denominator": d,
        "denominator_formula": f"d = {q}**{n - 1} * {2 * q - 1}",
        "scaled_cdf": scaled,
        "pmf": [fraction_str(x) for x in pmf],
        "sampling": "output the smallest z with scaled_cdf[z] >= u, u uniform in [1, d]",
        "guarantee": {
            "epsilon": g.epsilon_tilde / 2,
            "ratio": fraction_str(ratio),
            "statement": (
                f"(eps~/2, 0)-DP for counting queries: for true counts one apart, every output's "
                f"probabilities differ by a factor of at most {fraction_str(ratio)} = "
                f"e^(eps~/2), eps~/2 = ln(1 + 2**-{k}) = {g.epsilon_tilde / 2:.6g} <= eps/2 = "
                f"{float(eps) / 2:.6g}"
            ),
        },
        "accuracy": {
            "beta": fraction_str(beta),
            "half_width": g.half_width_for_tail(beta),
            "statement": "Pr[|output - true_count| > half_width] <= beta",
        },
    }


def _largest_n(digits_per_n: float, q: int) -> int:
    """Largest ``n`` whose table passes the size limits (floats: only for the error message)."""
    hi = 1
    while _fits(hi * 2, digits_per_n, q):
        hi *= 2
    lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(mid, digits_per_n, q):
            lo = mid
        else:
            hi = mid
    return lo


def _fits(n: int, digits_per_n: float, q: int) -> bool:
    digits = (n - 1) * digits_per_n + math.log10(2 * q - 1) + 1
    return digits <= MAX_DIGITS and (n + 1) * digits <= MAX_TABLE_DIGITS
