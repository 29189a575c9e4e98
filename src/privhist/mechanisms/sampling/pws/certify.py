"""Certifying an integer end-to-end matrix of a frequency sanitiser (Cohen, Geri, Sarlos &
Stemmer, Algorithms 4 and 5 on the ``2**-62`` grid): :func:`verify_frequency_rows` checks both
hockey-stick divergences between neighbouring rows exactly in integers, and
:func:`certify_float_rows` rounds a double-precision construction to the grid and shrinks its
``delta`` until the integer matrix passes. Used by :mod:`.sanitize` (Algorithm 4) and
:mod:`.max_separation_release` (Algorithm 5)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.mechanisms._grid import ONE
from privhist.noise import exp_rational_bounds

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def verify_frequency_rows(E: npt.ArrayLike, Q: npt.ArrayLike, epsilon: float, delta: float) -> bool:
    """Certify an integer end-to-end matrix: ``E[i, j] >= 0`` for ``1 <= j``,
    ``sum_j E[i, j] <= Q_i`` (realisable by a sanitiser of the sample), ``E[0] = 0``, and for
    every ``1 <= i <= m`` both hockey-stick divergences between rows ``i - 1`` and ``i`` (outputs
    "not reported" and every token) are at most ``delta``, computed exactly in integers with a
    rational ``r <= e^epsilon`` in place of ``e^epsilon`` (which only enlarges them).

    >>> import numpy as np
    >>> E = np.array([[0, 0], [0, 2**60]])  # pi_1 = 1/4, one token
    >>> Q = [0, 2**62]
    >>> verify_frequency_rows(E, Q, 1.0, 0.25), verify_frequency_rows(E, Q, 1.0, 0.2)
    (True, False)
    """
    Ea = np.asarray(E)
    Qa = np.asarray(Q)
    if Ea.ndim != 2 or Ea.shape[0] != Qa.shape[0] or Ea.shape[0] < 2:
        return False
    body = Ea[:, 1:] if Ea.shape[1] > 1 else np.zeros((Ea.shape[0], 0), dtype=np.int64)
    if (body < 0).any() or body[0].any():
        return False
    sums = [int(x) for x in body.sum(axis=1, dtype=object).tolist()]
    if any(s > int(qq) for s, qq in zip(sums, Qa.tolist(), strict=True)):
        return False
    r = exp_rational_bounds(Fraction(epsilon))[0]
    d = Fraction(delta)
    p, qd = r.numerator, r.denominator
    cleared = _float_precheck(body, sums, float(r), d)
    # sum max(0, qd a - p b) <= qd delta ONE  <=>  scaled by delta's denominator
    dn, dd = d.numerator, d.denominator
    budget = qd * dn * ONE
    nz = body != 0
    for i in range(1, Ea.shape[0]):
        if cleared[i]:
            continue
        cols = np.nonzero(nz[i - 1] | nz[i])[0]
        a = [ONE - sums[i - 1], *(int(x) for x in body[i - 1, cols].tolist())]
        b = [ONE - sums[i], *(int(x) for x in body[i, cols].tolist())]
        for x, y in ((a, b), (b, a)):
            h = sum(max(0, qd * u - p * v) for u, v in zip(x, y, strict=True))
            if h * dd > budget:
                return False
    return True


def _float_precheck(body: Any, sums: list[int], e: float, d: Fraction) -> npt.NDArray[np.bool_]:
    """Pairs ``(i - 1, i)`` whose two divergences a float computation shows to be below
    ``delta`` with room for every rounding error: with ``n`` terms, each ``a - e b`` is computed
    with relative error at most ``4 u`` (``u = 2**-53``; conversion of ``a``, ``b`` and ``e``, the
    product, the difference), and any summation order adds at most ``(n - 1) u`` times the sum of
    magnitudes, which is at most ``(1 + e) 2**62`` per row pair; the bound used is
    ``(n + 4) u (1 + e) 2**62 * 1.01``. Everything else is checked exactly."""
    n_rows, n_cols = body.shape
    out = np.zeros(n_rows, dtype=bool)
    if n_rows < 2:
        return out
    full = np.empty((n_rows, n_cols + 1))
    full[:, 1:] = body.astype(np.float64)
    full[:, 0] = [float(ONE - x) for x in sums]
    a, b = full[:-1], full[1:]
    up = np.maximum(a - e * b, 0.0).sum(axis=1)
    down = np.maximum(b - e * a, 0.0).sum(axis=1)
    err = (n_cols + 5) * 2.0**-53 * (1 + e) * float(ONE) * 1.01
    lim = float(d) * float(ONE) * (1 - 2.0**-50)
    out[1:] = (np.maximum(up, down) + err) <= lim
    return out


def certify_float_rows(
    build: Callable[[float], tuple[F64, Any]], Q: I64, eps: float, dl: float, start: float, fn: str
) -> tuple[I64, float, Any]:
    """The rows of a double-precision construction on the ``2**-62`` grid, certified.

    ``build(delta')`` returns the float end-to-end matrix (column 0 unused) built with
    ``delta' = delta - s`` and anything to pass along. Every entry is rounded down to the grid;
    a row whose float sum lands a few units above ``Q_i`` loses them on its largest entry; the
    integer matrix must pass :func:`verify_frequency_rows` at the full ``delta``, else ``s``
    (from ``start``) grows fourfold. Returns ``(E, delta', extra)``."""
    m = Q.shape[0] - 1
    s = start
    while s < dl / 2:
        P, extra = build(dl - s)
        E = np.zeros(P.shape, dtype=np.int64)
        body = np.floor(np.clip(P[:, 1:], 0.0, 1.0) * float(ONE))
        E[:, 1:] = np.minimum(body, float(ONE)).astype(np.int64)
        E[0] = 0
        excess = np.maximum(E[:, 1:].sum(axis=1) - Q, 0)
        top = 1 + np.argmax(E[:, 1:], axis=1)
        E[np.arange(m + 1), top] -= excess
        if verify_frequency_rows(E, Q, eps, dl):
            return E, dl - s, extra
        s *= 4
    raise ValidationError(  # pragma: no cover - not reached for delta >= 1e-12
        "delta", fn, "a value admitting a certified matrix", dl
    )
