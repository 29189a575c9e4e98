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
    :func:`discrete_gaussian` (CKS Algorithm 3), :func:`binomial`.

Parameters are ints or :class:`fractions.Fraction`; round floats conservatively first with
:func:`rational_at_least` / :func:`rational_at_most`. For analysis (not sampling):
:class:`DiscreteLaplace`, :class:`DiscreteGaussian`, :class:`Geometric`, :class:`Binomial`.
"""

from privhist.noise.bernoulli import bernoulli_exp, bernoulli_exp_array, bernoulli_rational
from privhist.noise.binomial import binomial
from privhist.noise.distributions import Binomial, DiscreteGaussian, DiscreteLaplace, Geometric
from privhist.noise.gaussian import discrete_gaussian
from privhist.noise.geometric import geometric
from privhist.noise.laplace import discrete_laplace
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
    "geometric",
    "rational_at_least",
    "rational_at_most",
]
