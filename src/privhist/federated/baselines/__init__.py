"""Baselines that sample-and-threshold is compared with (Bharadwaj & Cormode, AISTATS 2022,
Section 5), each run on the sampled clients at the same (epsilon, delta):

* :class:`CentralGeometric` — central discrete Laplace (geometric) noise on the histogram;
* :class:`HadamardResponse` — local DP by Hadamard response (Acharya, Sun & Zhang 2019);
* :class:`ShuffleBernoulli` — shuffle-model Bernoulli noise (Balcer & Cheu 2020).

Every class is built from public parameters only and offers ``guarantee()`` (a
:class:`~privhist.core.budget.Budget`) and ``estimate(items, rng)``: unbiased float64 estimates
of the per-bucket counts among the clients whose items (bucket ids in ``[0, domain_size)``) are
given.
"""

from privhist.federated.baselines.central import CentralGeometric
from privhist.federated.baselines.hadamard import HadamardResponse, walsh_hadamard_exact
from privhist.federated.baselines.shuffle import ShuffleBernoulli, bucket_delta

__all__ = [
    "CentralGeometric",
    "HadamardResponse",
    "ShuffleBernoulli",
    "bucket_delta",
    "walsh_hadamard_exact",
]
