"""Algorithm 5 on the release path: the certified integer end-to-end matrix of the
maximum-separation frequency sanitiser.

Cohen, Geri, Sarlos & Stemmer, Section 5, Algorithm 5 and Theorem 5.1. :mod:`.max_separation` builds
the piecewise-constant PDFs ``f_i`` and their discretisation on the union of breakpoints (token
``j`` is the interval ``(x_(j-1), x_j]``, at most ``3 m`` tokens for frequencies up to ``m``);
Theorem 5.1 makes the discretised rows realisable (``sum_j pi_(i,j) = pi_i <= q_i``),
``(eps, delta)``-DP, and maximally separated over *all* DP frequency sanitisers (property 3,
unconditionally, where Algorithm 4 attains it only with ``i`` tokens for frequency ``i``).

What runs, and what is proven for it (the same scheme as Algorithm 4's certified rows in
:mod:`.sanitize`):

1. Algorithm 5 in double precision with ``delta' = delta - s``, from the exact inclusion
   numerators ``Q_i`` (``q_i = Q_i / 2**62``);
2. every entry rounded *down* to the grid ``2**-62`` (``E_(i,j) = floor(2**62 pi_(i,j))``), a
   row whose float sum lands a few units above ``Q_i`` losing them on its largest entry, so
   ``sum_j E_(i,j) <= Q_i`` (realisable by a sanitiser of the sample);
3. the integer matrix is *certified* by :func:`.certify.verify_frequency_rows`: both
   hockey-stick divergences between rows ``i - 1`` and ``i`` (frequencies of neighbouring
   datasets; "not reported" included) at most ``delta``, in integer arithmetic with a rational
   ``r <= e^eps``. If the certificate fails, ``s`` grows fourfold and the matrix is rebuilt.

The certificate is what the guarantee rests on: whatever the float computation did, the rows
that are drawn from are ``(eps, delta)``-DP for frequencies moving by one (element-level
neighbours, Algorithm 2's setting). The draw itself is exact
(:func:`.sanitize.sanitize_frequencies`: one uniform integer below ``Q_i`` compared with the
integer cumulative sums of row ``i``), so a key of frequency ``i`` is reported with token ``j``
with probability exactly ``E_(i,j) / 2**62``. The separation of Theorem 5.1 holds for the float
rows up to the rounding and ``s`` (relative ``s / delta``, about ``1e-8`` or less); only the
privacy is certified.

Each token carries its *sanitized value* ``x_j`` (the right end of its interval, a number in
``(0, m]``): the paper's sanitized frequency, of which only the order matters for the ordinal
estimators of Section 6; the MLE of equation (9) gives the frequency estimate.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.mechanisms._grid import ONE
from privhist.mechanisms.sampling.pws.certify import certify_float_rows
from privhist.mechanisms.sampling.pws.max_separation import max_separation_pdfs

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: largest max_frequency for Algorithm 5 on the release path (at most 3 m token columns; about
#: 4 s of float work per attempt at m = 1000)
MAX_SEPARATION_FREQUENCY = 1000

#: largest max_frequency for Algorithm 5 below delta = 2**-42 per key, where its densities are
#: computed in high precision (:mod:`.fine_rows`; about 10 s at m = 150, growing like m**2)
MAX_SEPARATION_FINE = 200


def max_separation_limit(delta: float) -> int:
    """The largest ``max_frequency`` Algorithm 5 accepts at ``delta`` per key.

    >>> max_separation_limit(1e-6), max_separation_limit(1e-20)
    (1000, 200)
    """
    from privhist.mechanisms.sampling.pws.fine_rows import needs_fine_grid

    return MAX_SEPARATION_FINE if needs_fine_grid(delta) else MAX_SEPARATION_FREQUENCY


#: frequency rules of the keys-and-frequencies sanitiser: ``"integer-tokens"`` (Algorithm 4: a
#: key of frequency ``i`` gets a token ``j <= i``) and ``"max-separation"`` (Algorithm 5: tokens
#: are the intervals between the breakpoints of piecewise-constant densities, maximally
#: separated over every DP frequency sanitiser, Theorem 5.1)
RULES = ("integer-tokens", "max-separation")
#: the former spellings, by the paper's algorithm numbers, still accepted
RULE_ALIASES = {"algorithm4": "integer-tokens", "algorithm5": "max-separation"}


def check_rule(rule: object, function: str, name: str = "frequency_rule") -> str:
    """``rule`` if it is one of :data:`RULES` (an alias of :data:`RULE_ALIASES` gives its rule),
    else a ValidationError naming ``name``.

    >>> check_rule("algorithm5", "sample"), check_rule("integer-tokens", "sample")
    ('max-separation', 'integer-tokens')
    """
    if isinstance(rule, str) and rule in RULE_ALIASES:
        return RULE_ALIASES[rule]
    if rule not in RULES:
        raise ValidationError(name, function, " or ".join(RULES), rule)
    return str(rule)


def max_separation_rows(Q: I64, epsilon: float, delta: float) -> tuple[I64, float, F64]:
    """``(E, delta', x)``: the certified integer end-to-end matrix of Algorithm 5 for inclusion
    numerators ``Q`` (module notes), the ``delta'`` it was built with, and the token values
    ``x_1 < ... < x_K`` (``E`` has ``K + 1`` columns; column 0 is left for the caller).

    >>> import numpy as np
    >>> Q = np.array([0] + [2**62] * 4, dtype=np.int64)  # q_i = 1 for i = 1..4
    >>> E, used, x = max_separation_rows(Q, 0.5, 0.05)
    >>> E.shape[1] - 1 == len(x) <= 3 * 4, bool(E[1:, 1:].sum(axis=1).max() <= 2**62)
    (True, True)
    """
    m = Q.shape[0] - 1
    if m > MAX_SEPARATION_FREQUENCY:
        raise ValidationError(
            "max_frequency",
            "max_separation_rows",
            f"<= {MAX_SEPARATION_FREQUENCY} with Algorithm 5",
            m,
        )
    qf = Q.astype(np.float64) / float(ONE)

    def build(d: float) -> tuple[F64, F64]:
        A = max_separation_pdfs(qf, epsilon, d)
        return np.asarray(A.matrix, dtype=np.float64), np.asarray(A.breakpoints, dtype=np.float64)

    start = min(16 * (3 * m + 6) * 2.0**-53 * (1 + math.exp(epsilon)), delta / 64)
    E, used, x = certify_float_rows(build, Q, epsilon, delta, start, "max_separation_rows")
    return E, used, x
