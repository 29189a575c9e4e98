"""CompactHistogram (Balcer & Vadhan, Section 7: Lemma 7.1, Algorithm 9, Theorem 7.2).

A histogram over a huge universe ``X = [0, 2**B)`` (e.g. 64-bit ids) released as a polynomial
``p`` of degree at most ``D`` over ``F = GF(2**m)``, ``m = 2 * 3**l`` (:mod:`.gf2`); the count of
any key ``x`` is ``M0(p(x) + 1)``, so every key of the universe gets a count and the output has
``D + 1`` coefficients of ``m`` bits.

Our reading of Section 7
------------------------
*Family (Lemma 7.1).* Polynomials of degree ``<= D`` over ``F`` form a ``(D+1)``-wise independent
family: for distinct points ``z_1..z_{D+1}`` the map ``p -> (p(z_i))`` is a bijection onto
``F**(D+1)``. ``T(u) = u - 1`` maps ``[d0]+ = {1..2**m}`` onto ``F`` (elements as integers) and a
key ``x < 2**B <= 2**m`` is the field element with the same bits.

*Algorithm 9.* ``A`` = keys with a positive count (at most ``D``, a public bound: the paper's
``n`` rows bound it); ``c~_x = M(min(c_x, n), U)`` for ``x in A`` (BasicHistogram over ``A``);
for each ``x in A`` a uniform ``u_x`` in ``S_x = {u : M0(u) = c~_x}`` (an interval, since ``M0``
inverts a CDF); then a uniform polynomial with ``p(x) = u_x - 1`` on ``A``: uniform values at
``D + 1 - |A|`` further points (the largest field elements not in ``A``) and interpolation.

*Output distribution.* For ``|A| <= D + 1``, the polynomials consistent with values ``v`` on
``A`` number ``|F|**(D+1-|A|) prod_{x in A} |M0^{-1}(v_x)|``, so a fixed polynomial ``p`` is
released with probability::

    Pr[p] = |F|**-(D+1) * prod_{x in A} Pr[M(c_x) = v_x] / Pr[M0 = v_x],   v_x = M0(p(x) + 1).

Hence the likelihood ratio between two datasets factorises over the keys whose counts differ,
each key contributing the ratio of its own marginal: ``M(c)`` when ``c > 0`` and ``M0`` when
``c = 0``. That is :meth:`CompactHistogram.key_distribution`, and the per-key pure-DP check of
the contract tests is exact for the whole release (the tests also enumerate whole releases on a
tiny field).

*The empty-bin distribution M0 (Theorem 7.2).* ``M`` is FastSample (Theorem 4.6) with
``e^(eps~/2) = 1 + 2**-K`` and mixing probability ``gamma``; its pmf at count 0 is at least
``gamma / (n + 1)``. The paper defers ``M0`` to its full version; ours rounds the CDF of
``M(0, U)`` up to the grid ``1/2**m``: ``S0(z) = ceil(2**m F_0(z))`` (``S0(n) = 2**m``) and
``M0(u) = min{z : S0(z) >= u}``. Every probability moves by less than ``2**-m``, so with
``2**m >= 2**(J+1) (n+1) / gamma`` both ratios ``Pr[M0 = z] / Pr[M(0) = z]`` and its inverse
are at most ``1 + 2**-J`` (the ``e^eps2``, ``e^eps3`` of Theorem 7.2).

*Budget.* For a relation touching ``l0`` keys by at most ``c`` each, a key moves from ``M0`` to
``M(j)`` (``j <= c``) or between ``M(i)`` and ``M(j)``; its ratio is at most
``(1 + 2**-K)**c (1 + 2**-J)``. We take ``K = ceil(log2(4 l1 / (3 eps)))`` and
``J = ceil(log2(4 l0 / eps))``, so ``c 2**-K + 2**-J <= eps / l0`` and (``ln(1 + t) <= t``, basic
composition over the ``l0`` keys, justified by the factorisation) the release is ``(eps, 0)``-DP.
``eps`` must lie in ``(0, 1]``. ``gamma = beta / 2**(B+1)`` with ``beta = 1/ceil(1/(1 -
confidence))`` (Corollary 7.3's ``gamma = beta / (2|X|)``) while that is at least ``2**-62``
(FastSample's smallest ``gamma``; for larger universes the per-query accuracy is unchanged but
the simultaneous bound over all of ``X`` is weaker than Corollary 7.3's), and ``l`` is
the smallest with
``2**m >= 2**B``, ``>= D + 1`` and ``>= 2**(J+1) (n+1) / gamma`` (all public).

*The promise ``|A| <= D``.* The polynomial can be fixed at no more than ``D + 1`` keys, so the
guarantee is for datasets with at most ``D`` keys of positive count (``max_keys``), the
paper's setting (``n`` rows, replace neighbours, degree ``n``). Data with more keys is refused
(InputDataError) and that refusal is not covered: under add/remove neighbours one record can
cross the bound, and the refusal then tells the two datasets apart with certainty. This cannot be
made private by refusing with some probability: a pure-DP mechanism that refuses with
probability 1 on one dataset does so on every dataset joined to it by a chain of neighbours.
A total version would need a release for every ``|A| > D``, which Algorithm 9 does not give.
So the bound is a promise and the release's ``guarantee`` names it (``condition``): choose
``D`` at least the public number of rows (then it always holds) or above any possible number of
distinct keys.

*Accuracy.* A key with count ``c > 0`` errs by more than ``a`` with probability at most
FastSample's ``error_bound(a)``; an empty key with at most ``(1 + 2**-J)`` times that at
``c = 0``; :attr:`CompactHistogram.width` is the smallest ``a`` with this ``<= beta`` (Theorem
7.2's per-query accuracy; simultaneous accuracy over ``X`` costs a union bound).

Running time (strict bound from public quantities)
--------------------------------------------------
``|A| <= D`` FastSample draws (each within Theorem 4.6's bound with ``strict_time``), ``|A|``
uniform integers below ``2**m``, ``D + 1 - |A|`` uniform ``m``-bit values, at most ``2D + 1``
candidate extra points, and one interpolation through exactly ``D + 1`` points:
``2.5 (D+1)**2 + O(m)`` vectorised products in ``F`` (:meth:`.gf2.GF2m.interpolate`), whatever
the data. Each product is ``(m/e)**2`` table look-ups in ``GF(2**e)``, ``e <= 18``. Evaluating
a key costs ``D + 1`` products (done as ``O(sqrt(D))`` scalar products and table passes by
:class:`.gf2.PolynomialEvaluator`) and ``bit_length(n)`` steps of the CDF search of ``M0``. No
floating point is used on the release path (floats appear only in displayed parameters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import Constraint
from privhist.io.release import Release
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.finite._exact import ceil_log2, fraction_str, random_bits, uniform_int
from privhist.mechanisms.finite.geometric import FastSample, _gallop
from privhist.mechanisms.finite.gf2 import MAX_L, GF2m, PolynomialEvaluator
from privhist.mechanisms.finite.histograms import _COUNT_BOUND, _STRICT, DEFAULT_COUNT_BOUND
from privhist.mechanisms.registry import register

__all__ = [
    "COMPACT_FORMAT",
    "CompactCounts",
    "CompactHistogram",
    "EmptyBinSampler",
]

#: the ``format`` field of a compact payload
COMPACT_FORMAT = "privhist-compact"
#: default public bound on the number of keys with a positive count (the polynomial's degree)
DEFAULT_MAX_KEYS = 1000
_LIST_ALL = 2048
_WINDOW_TAIL = Fraction(1, 1 << 160)


class EmptyBinSampler:
    """``M0 : [2**m]+ -> [n]``: the CDF of ``M(0, U)`` rounded up to multiples of ``2**-m``
    (module notes). ``M0(u) = min{z : S0(z) >= u}`` with ``S0(z) = ceil(2**m F_0(z))``.

    >>> m0 = EmptyBinSampler(FastSample.from_k(4, 1, "1/8"), 6)
    >>> [m0.scaled_cdf(z) for z in range(5)]  # ceil(64 F(0)) = ceil(64 * 0.55) = 36, ...
    [36, 45, 51, 56, 64]
    >>> m0.evaluate(36), m0.evaluate(37), m0.evaluate(64)
    (0, 1, 4)
    """

    def __init__(self, sampler: FastSample, m: int) -> None:
        self.sampler = sampler
        self.m = m
        self.d0 = 1 << m
        self.n = sampler.n

    def scaled_cdf(self, z: int) -> int:
        """``S0(z) = ceil(2**m F_0(z))`` (0 below 0, ``2**m`` from ``n`` on)."""
        if z < 0:
            return 0
        if z >= self.n:
            return self.d0
        big = self.sampler.scaled_cdf(0, z)
        return -((-self.d0 * big) // self.sampler.denominator)

    def evaluate(self, u: int) -> int:
        """``M0(u)`` for ``u in [1, 2**m]``: ``bit_length(n)`` lifting steps over ``z``."""
        cur = 0
        for i in reversed(range(self.n.bit_length())):
            cand = cur + (1 << i)
            if cand <= self.n and self.scaled_cdf(cand - 1) < u:
                cur = cand
        return cur

    def preimage(self, value: int) -> tuple[int, int]:
        """``S_v = {u : M0(u) = v}`` as ``(low, size)``: ``u in [low + 1, low + size]``."""
        low = self.scaled_cdf(value - 1)
        return low, self.scaled_cdf(value) - low

    def pmf(self, z: int) -> Fraction:
        return Fraction(self.scaled_cdf(z) - self.scaled_cdf(z - 1), self.d0)


@register
class CompactHistogram(Mechanism):
    """``CompactHistogram_{M, M0}`` (Algorithm 9, Theorem 7.2): a degree-``D`` polynomial over
    ``GF(2**(2 * 3**l))`` from which every key of ``[0, 2**B)`` gets a count (module notes).

    ``(eps, 0)``-DP for the neighbouring relation (the release's likelihood factorises over
    keys). The release has no rows: the polynomial is ``metadata["compact"]`` (write it as JSON
    or Parquet, or with :func:`privhist.io.compact.write_compact`); :class:`CompactCounts`
    evaluates keys.

    >>> from privhist import SeededRandom
    >>> m = CompactHistogram(1.0, universe_bits=16, max_keys=4, count_bound=50)
    >>> m.field.m, m.parameters()["degree"]
    (54, 4)
    >>> r = m.release(Counts.from_arrays([7, 300], [40, 1]), SeededRandom(2))
    >>> len(r), len(r.metadata["compact"]["coefficients"])
    (0, 5)
    >>> 0 <= CompactCounts.from_release(r).count(7) <= 50
    True
    """

    name = "compact"
    default_candidate = False  # a compact polynomial is asked for, never picked by default
    #: the polynomial lives in the metadata, which CSV rows cannot carry
    output_formats = ("json", "parquet")
    summary = "degree-D polynomial over GF(2^(2*3^l)): a count for every key of a huge universe"
    sparse = False
    epsilon_constraint = Constraint.real(
        0,
        1,
        open_low=True,
        note=" (Theorem 7.2 with the samplers of Section 4 assumes epsilon <= 1); the nearest "
        "valid setting is epsilon=1",
    )
    options = (
        Option(
            "universe_bits",
            int,
            64,
            "keys are the integers in [0, 2**B) (pure-sparse, compact)",
            constraint=Constraint.integer(1, 2 * 3**MAX_L - 80),
        ),
        Option(
            "key_encoding",
            str,
            "int",
            "compact: keys are integers in [0, 2**B) (int) or UTF-8 strings of < B/8 bytes (utf8)",
            ("int", "utf8"),
        ),
        Option(
            "max_keys",
            int,
            DEFAULT_MAX_KEYS,
            "public bound D on the number of keys with a positive count (polynomial degree)",
            constraint=Constraint.integer(1, 1 << 16),
        ),
        _COUNT_BOUND,
        _STRICT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        universe_bits: int = 64,
        key_encoding: str = "int",
        max_keys: int = DEFAULT_MAX_KEYS,
        count_bound: int = DEFAULT_COUNT_BOUND,
        strict_time: bool = False,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        eps = Fraction(self.epsilon)
        self.delta_spent = 0.0  # pure DP: a requested delta is not spent
        self.universe_bits: int = self.check_option("universe_bits", universe_bits)
        self.max_keys: int = self.check_option("max_keys", max_keys)
        self.n: int = self.check_option("count_bound", count_bound)
        self.strict_time: bool = self.check_option("strict_time", strict_time)
        self.key_encoding: str = self.check_option("key_encoding", key_encoding)
        #: no public domain: every key of the universe has a count (evaluate the polynomial)
        self.domain = np.zeros(0, dtype=np.int64)
        l0 = self.neighbouring.l0_sensitivity
        l1 = self.neighbouring.l1_sensitivity
        self.k = ceil_log2(4 * l1 * eps.denominator, 3 * eps.numerator)
        self.j = ceil_log2(4 * l0 * eps.denominator, eps.numerator)
        beta = Fraction(1 - self.confidence)
        self.beta = Fraction(1, math.ceil(1 / beta))
        # Corollary 7.3's beta / (2 |X|), kept >= 2**-62 (FastSample's smallest gamma)
        shift = min(self.universe_bits + 1, 62 - self.beta.denominator.bit_length())
        self.gamma = self.beta / (1 << shift)
        self.sampler = FastSample.from_k(self.n, self.k, self.gamma)
        g = self.gamma
        need = max(
            self.universe_bits,
            (self.max_keys + 1).bit_length(),
            ceil_log2((1 << (self.j + 1)) * (self.n + 1) * g.denominator, g.numerator),
        )
        l_ = next((i for i in range(MAX_L + 1) if 2 * 3**i >= need), None)
        if l_ is None:
            raise ValidationError(
                "universe_bits", fn, f"small enough for GF(2**{2 * 3**MAX_L})", universe_bits
            )
        self.field = GF2m(l_)
        self.m0 = EmptyBinSampler(self.sampler, self.field.m)
        self.width = _gallop(self.n, lambda a: self._error_bound(a) > self.beta)

    # -- analysis -------------------------------------------------------------------------------

    @property
    def closeness(self) -> Fraction:
        """``1 + 2**-J``: the bound on ``M0`` against ``M(0, U)``, both ways."""
        return 1 + Fraction(1, 1 << self.j)

    def _error_bound(self, a: int) -> Fraction:
        return self.closeness * self.sampler.error_bound(a)

    def parameters(self) -> dict[str, Any]:
        c = self.neighbouring.linf_sensitivity
        l0 = self.neighbouring.l0_sensitivity
        return {
            "universe_bits": self.universe_bits,
            "degree": self.max_keys,
            "count_bound": self.n,
            "field_l": self.field.l,
            "field_m": self.field.m,
            "modulus": self.field.describe(),
            "K": self.k,
            "J": self.j,
            "ratio": fraction_str(self.sampler.ratio),
            "closeness": fraction_str(self.closeness),
            "gamma": fraction_str(self.gamma),
            "noise_width": self.sampler.width,
            "epsilon_effective": l0 * (c * math.log1p(2.0**-self.k) + math.log1p(2.0**-self.j)),
            "half_width": self.width,
            "strict_time": self.strict_time,
        }

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        return np.ones(max_count + 1, dtype=np.float64)

    def noise_std(self) -> float:
        return self.sampler.noise.std()

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        c = min(count, self.n)
        if self.n < _LIST_ALL:
            radius = self.n
        else:
            radius = self.sampler.noise.half_width_for_tail(_WINDOW_TAIL)
        if c > 0:
            probs, tail = self.sampler.pmf_window(c, radius)
            return KeyDistribution(dict(probs), tail)
        out = {z: self.m0.pmf(z) for z in range(0, min(self.n, radius) + 1)}
        return KeyDistribution(out, 1 - sum(out.values(), start=Fraction(0)))

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        utf8 = {"universe_bits": 64, "key_encoding": "utf8"}
        return [
            cls(0.5, max_keys=3, count_bound=12, **utf8),  # type: ignore[arg-type]
            cls(1.0, 0.0, Neighbouring.replace(), max_keys=4, count_bound=9, **utf8),  # type: ignore[arg-type]
            cls(0.7, 0.0, Neighbouring.user(2, 2), max_keys=5, count_bound=10, **utf8),  # type: ignore[arg-type]
        ]

    # -- release --------------------------------------------------------------------------------

    def encode_keys(self, keys: npt.NDArray[Any], function: str) -> list[int]:
        """Keys as field elements: integers in ``[0, 2**B)`` (ints or decimal strings)."""
        return encode_keys(keys, self.universe_bits, function, self.key_encoding)

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        fn = self.function_name()
        present = counts.counts > 0
        points = self.encode_keys(counts.keys[present], fn)
        if len(points) > self.max_keys:
            raise InputDataError(
                f"{fn}: {len(points)} keys have a positive count but max_keys (the public "
                f"degree bound) is {self.max_keys}; raise max_keys"
            )
        true = np.minimum(counts.counts[present], self.n)
        above = int((counts.counts[present] > self.n).sum())
        noisy = self.sampler.sample(true, rng, strict=self.strict_time)
        values: list[int] = []
        for v in noisy.tolist():
            low, size = self.m0.preimage(int(v))
            values.append(low + uniform_int(rng, size))  # u - 1 for u uniform in S_v
        coefficients = self.field.interpolate(*self.complete(points, values, rng))
        payload = self.payload(coefficients)
        empty = np.zeros(0, dtype=np.int64)
        return empty, {
            "values": empty.copy(),
            "info": {"counts_above_bound": above, "compact": payload},
        }

    def complete(
        self, points: list[int], values: list[int], rng: RandomSource
    ) -> tuple[list[int], list[int]]:
        """Add ``D + 1 - |A|`` points (the largest field elements not in ``A``) with uniform
        values, so that interpolation gives a uniform polynomial consistent with ``A``."""
        taken = set(points)
        pts, vals = list(points), list(values)
        cand = self.field.size - 1
        while len(pts) < self.max_keys + 1:
            if cand not in taken:
                pts.append(cand)
                vals.append(random_bits(rng, self.field.m))
            cand -= 1
        return pts, vals

    def payload(self, coefficients: Sequence[int]) -> dict[str, Any]:
        """The compact output: everything :class:`CompactCounts` needs, JSON-safe."""
        return {
            "format": COMPACT_FORMAT,
            "version": 1,
            "algorithm": "CompactHistogram (Balcer & Vadhan, Algorithm 9)",
            "field": {"l": self.field.l, "m": self.field.m, "modulus": self.field.describe()},
            "universe_bits": self.universe_bits,
            "key_encoding": self.key_encoding,
            "key_encoding_rule": "the key's integer v (int: the key; utf8: bytes 0x01 || UTF-8, "
            "big-endian) is the field element sum_i bit_i(v) x^i",
            "count_bound": self.n,
            "K": self.k,
            "gamma": fraction_str(self.gamma),
            "count_rule": "count(x) = min{z : ceil(2**m F(z)) >= p(x) + 1}, F the CDF of "
            "FastSample(n, K, gamma) at count 0",
            "degree": len(coefficients) - 1,
            "coefficients": [format(c, "x") for c in coefficients],
        }

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        meta = super().metadata(rng)
        condition = (
            f"datasets with at most max_keys = {self.max_keys} keys of positive count (the "
            "polynomial's degree, a public promise; data with more keys is refused, and the "
            "refusal reveals that the promise was broken)"
        )
        guarantee = dict(meta["guarantee"])
        guarantee["condition"] = condition
        guarantee["statement"] = f"{guarantee['statement']}, for {condition}"
        meta["guarantee"] = guarantee
        return meta

    def release(self, counts: Counts, rng: RandomSource | None = None) -> Release:
        rel = super().release(counts, rng)
        payload = rel.diagnostics.pop("compact")
        meta = dict(rel.metadata)
        meta["compact"] = payload
        meta["released_keys"] = "all keys of the universe (evaluate metadata.compact)"
        return Release(keys=rel.keys, values=rel.values, metadata=meta, diagnostics=rel.diagnostics)


def encode_keys(
    keys: npt.NDArray[Any] | Sequence[Any], bits: int, function: str, encoding: str = "int"
) -> list[int]:
    """Keys as field elements (Python ints below ``2**bits``), injectively.

    ``int``: integers in ``[0, 2**bits)`` (ints or decimal strings). ``utf8``: the string's
    UTF-8 bytes ``b`` as the big-endian integer of ``0x01 || b`` (the marker byte keeps leading
    zero bytes), so strings of fewer than ``bits / 8`` bytes fit. Anything else is a
    :class:`ValidationError` naming the first bad key.

    >>> encode_keys(["7", 9], 8, "f"), encode_keys(["a"], 16, "f", "utf8")
    ([7, 9], [353])
    """
    out: list[int] = []
    top = 1 << bits
    for key in np.asarray(keys, dtype=object).tolist():
        value: int | None = None
        if encoding == "utf8":
            if isinstance(key, str):
                try:
                    value = int.from_bytes(b"\x01" + key.encode("utf-8"), "big")
                except UnicodeEncodeError:  # e.g. undecodable command-line bytes (surrogates)
                    raise ValidationError("keys", function, "valid Unicode text", key) from None
            if value is None or value >= top:
                raise ValidationError(
                    "keys", function, f"strings of at most {bits // 8 - 1} UTF-8 bytes", key
                )
            out.append(value)
            continue
        if isinstance(key, int | np.integer) and not isinstance(key, bool):
            value = int(key)
        elif isinstance(key, str) and key.strip().isdigit():
            value = int(key.strip())
        if value is None or not 0 <= value < top:
            raise ValidationError("keys", function, f"integers in the universe [0, 2**{bits})", key)
        out.append(value)
    return out


class CompactCounts:
    """A compact release ready for queries: ``count(key) = M0(p(key) + 1)``.

    Built from the payload (``metadata["compact"]`` of a release, or a file written by
    :func:`privhist.io.compact.write_compact`, or a release written as JSON / Parquet).
    """

    def __init__(self, payload: dict[str, Any]) -> None:
        fn = "CompactCounts"
        if not isinstance(payload, dict) or payload.get("format") != COMPACT_FORMAT:
            raise InputDataError(f"{fn}: not a compact histogram (no '{COMPACT_FORMAT}' payload)")
        try:
            self.field = GF2m(int(payload["field"]["l"]))
            self.universe_bits = int(payload["universe_bits"])
            self.key_encoding = str(payload.get("key_encoding", "int"))
            n, k = int(payload["count_bound"]), int(payload["K"])
            gamma = Fraction(str(payload["gamma"]))
            self.coefficients = [int(c, 16) for c in payload["coefficients"]]
        except (KeyError, TypeError, ValueError) as err:
            raise InputDataError(f"{fn}: malformed compact payload ({err})") from None
        if any(not 0 <= c < self.field.size for c in self.coefficients) or not self.coefficients:
            raise InputDataError(f"{fn}: coefficients outside GF(2**{self.field.m})")
        self.m0 = EmptyBinSampler(FastSample.from_k(n, k, gamma), self.field.m)
        self.payload = payload
        self._evaluator: PolynomialEvaluator | None = None

    @property
    def evaluator(self) -> PolynomialEvaluator:
        """The polynomial prepared for evaluation (built on first use, about ``(D+1) m`` bit
        operations; then ``O(sqrt(D))`` scalar products and two table passes per key)."""
        if self._evaluator is None:
            self._evaluator = PolynomialEvaluator(self.field, self.coefficients)
        return self._evaluator

    @classmethod
    def from_release(cls, release: Release) -> CompactCounts:
        return cls(release.metadata.get("compact", {}))

    def value(self, key: int) -> int:
        """The field value ``p(key)`` (``key`` a field element)."""
        return self.evaluator.value(key)

    def count(self, key: Any) -> int:
        """The released count of ``key`` (an integer of the universe)."""
        (x,) = encode_keys([key], self.universe_bits, "CompactCounts.count", self.key_encoding)
        return self.m0.evaluate(self.value(x) + 1)

    def counts(self, keys: Sequence[Any]) -> list[int]:
        """Counts of many keys (every key is validated before any is evaluated)."""
        xs = encode_keys(keys, self.universe_bits, "CompactCounts.counts", self.key_encoding)
        return [self.m0.evaluate(v + 1) for v in self.evaluator.values(xs)]
