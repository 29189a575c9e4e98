"""Exact integer samplers for differential privacy.

Every sampler takes a :class:`~privhist.core.random.RandomSource` (``rng``), uses integer and
rational arithmetic only, and is exact: the output distribution is the stated one with no
rounding error, following Canonne, Kamath & Steinke (2020), "The Discrete Gaussian for
Differential Privacy" (CKS). The shared primitive is an exact comparison of a lazily drawn
uniform real with an exactly computable threshold (:mod:`privhist.noise._exact`), which costs
one 64-bit word in all but a ``2**-64`` fraction of cases.

Samplers:
    :func:`bernoulli_rational`, :func:`bernoulli_exp` (CKS Algorithm 1),
    :func:`bernoulli_exp_array`, :func:`geometric`, :func:`discrete_laplace` (CKS Algorithm 2),
    :func:`discrete_gaussian` (CKS Algorithm 3), :func:`binomial`; :func:`laplace_threshold`
    (counts plus discrete Laplace noise kept at a threshold, drawing only the noise that can
    reach it), :func:`~privhist.noise.subset.uniform_subset`.

Parameters are ints or :class:`fractions.Fraction`; floats are refused, so round them
conservatively first with :func:`rational_at_least` / :func:`rational_at_most` (for example a
Laplace scale ``rational_at_least(Fraction(sensitivity) / Fraction(epsilon))``). For analysis
(not sampling): :class:`DiscreteLaplace`, :class:`DiscreteGaussian`, :class:`Geometric`,
:class:`Binomial`.

Limits (each enforced with a :class:`~privhist.core.errors.ValidationError`):
    * geometric rates ``x >= 2**-40`` and Laplace scales ``<= 2**40`` (samples stay far inside
      int64; an impossible-in-practice overflow raises ``OverflowError`` rather than wrapping);
    * :func:`discrete_gaussian` with ``floor(sigma) > 4096`` needs ``sigma2 = a / b`` with
      ``a < 2**61``; below that any rational works;
    * :func:`bernoulli_exp_array` denominators ``< 2**62``; array inputs of
      :func:`bernoulli_rational` below ``2**63`` (scalars may be any size);
    * :func:`binomial` trials per entry ``<= 2**62``.

Costs: one 64-bit word per Bernoulli, geometric (rate ``>= 45 / 2**16``) or discrete Laplace
(scale ``<= 1456``) sample, plus one sign bit; geometric and Laplace samples whose table puts its
floors in at most half of the 256 first-byte intervals (scales up to about 45) read one byte
first and complete the word only when that byte does not decide (about 1.2 bytes a sample at
scale 1, see :mod:`privhist.noise._tables`); a word per 12 bits of ``log2(1 / x)`` beyond that;
discrete Gaussian about 1.3 proposals of two words each (up to 2 for ``sigma < 1``; more words
above ``sigma = 4096``); binomial one Binomial(m, 1/2) draw per binary digit of ``p``, each
about six words by exact rejection once ``m >= 2048`` (popcounts of ``m`` bits below). Tables
are built once per parameter (milliseconds to a few tenths of a second) and cached.
"""

from privhist.noise._exact import exp_rational_bounds
from privhist.noise.bernoulli import bernoulli_exp, bernoulli_exp_array, bernoulli_rational
from privhist.noise.binomial import binomial
from privhist.noise.distributions import Binomial, DiscreteGaussian, DiscreteLaplace, Geometric
from privhist.noise.gaussian import discrete_gaussian
from privhist.noise.geometric import geometric
from privhist.noise.laplace import discrete_laplace, laplace_threshold
from privhist.noise.rational import rational_at_least, rational_at_most

__all__ = [
    "Binomial",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Geometric",
    "bernoulli_exp",
    "bernoulli_exp_array",
    "bernoulli_rational",
    "binomial",
    "discrete_gaussian",
    "discrete_laplace",
    "exp_rational_bounds",
    "geometric",
    "laplace_threshold",
    "rational_at_least",
    "rational_at_most",
]
