"""The count columns every user-level selector releases, their noise, and what they state.

A selector's optional second release adds noise to the number of users counted on each released
key (each user counted on a uniformly random subset of at most ``k_c`` of the released keys it
holds). Adding or removing one user then changes at most ``k_c`` counts, each by one: L1
sensitivity ``k_c`` and L2 sensitivity ``sqrt(k_c)``. Two noises fit (``CountNoise`` of
:mod:`~privhist.mechanisms.user_level._count_noise`):

* **discrete Gaussian** ``N_Z(0, sigma2)`` (Canonne, Kamath & Steinke 2020, "The Discrete
  Gaussian for Differential Privacy", CKS), certified by the Gaussian-profile bound of
  :mod:`~privhist.mechanisms.user_level.cumulative` (item 4, one round): ``(epsilon_c,
  delta_G(epsilon_c - 2 k_c / sigma2; sqrt(k_c / sigma2)))``-DP for ``sigma2 >= 1``
  (``count_sigma2`` finds the smallest such ``sigma2`` for a target ``delta_c``);
* **discrete Laplace** of scale ``t >= k_c / epsilon_c`` (CKS Algorithm 2): the ratio of its
  probabilities at ``z`` and ``z - 1`` is at most ``e**(1/t)``, so a shift of the count vector by
  at most ``k_c`` in L1 norm changes the probability of every output by at most ``e**(k_c / t)
  <= e**epsilon_c``: pure ``epsilon_c``-DP, no delta.

The Laplace noise grows like ``k_c`` and the Gaussian like ``sqrt(k_c log(1 / delta_c))``, so for
the few keys per user where vote selection is chosen the Laplace noise is the smaller (at
``epsilon_c = 0.25``, ``delta_c = 5e-9`` it is for every ``k_c`` up to about 20). ``"auto"``
takes the noise of smaller expected absolute value (``CountNoise.expected_abs``), a function of
``(epsilon_c, delta_c, k_c)`` only.

The columns are post-processed the same way for every noise: a released key is held by at least
one user (keys absent from the input are never released), so its count is clipped to at least 1,
and the interval's ends with it. There is no ``estimate`` column: the count is the estimate. The
metadata says what the count is and what the interval covers (:func:`count_statement`): the
counted users, which are all the holders when none of them holds more than ``k_c`` released keys.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.noise import DiscreteGaussian


def clipped_count_columns(
    noisy: npt.NDArray[np.int64], sigma2: Fraction, confidence: float
) -> dict[str, Any]:
    """``values`` (noisy counts clipped to at least 1), ``lower`` and ``upper`` (``noisy -+ w``,
    ``w`` the exact discrete Gaussian ``confidence`` quantile, clipped the same way).

    >>> cols = clipped_count_columns(np.array([-9, 0, 50]), Fraction(4), 0.95)
    >>> cols["values"].tolist(), cols["lower"].tolist(), cols["upper"].tolist()
    ([1, 1, 50], [1, 1, 46], [1, 4, 54])
    """
    return clipped(noisy, int(DiscreteGaussian(sigma2).interval(confidence)[1]))


def clipped(noisy: npt.NDArray[np.int64], w: int) -> dict[str, Any]:
    return {
        "values": np.maximum(noisy, 1),
        "lower": np.maximum(noisy - w, 1),
        "upper": np.maximum(noisy + w, 1),
    }


def count_statement(
    count_max_keys: int, confidence: float, noise: str = "discrete Gaussian"
) -> dict[str, Any]:
    """What the count columns of a user-level selector estimate and what the interval covers
    (the release's ``metadata["counts"]``)."""
    return {
        "count": (
            "noisy number of users holding the key, each user counted on at most "
            f"{count_max_keys} released keys (a uniformly random subset of the released keys "
            "it holds), clipped to at least 1"
        ),
        "interval": (
            f"lower..upper covers that counted number with probability at least {confidence} "
            f"(exact {noise} quantiles); it covers the number of users holding the key "
            f"when none of them holds more than {count_max_keys} released keys, and otherwise "
            "the true number can exceed upper"
        ),
        "count_max_keys": count_max_keys,
        "noise": noise,
    }
