"""The experiment's data: synthetic i.i.d. and heterogeneous users, the msweb and retail users
that stand in for the paper's Foursquare and Sentiment140, and the tight frame for ``d`` items."""

from __future__ import annotations

import numpy as np

from privhist.core.errors import InputDataError
from privhist.core.random import SeededRandom
from privhist.engines.local.federated_data import read_msweb, read_user_counts
from privhist.experiments import _common
from privhist.experiments.federated_frequency.settings import REAL_FILES, Settings
from privhist.federated.kashin import TightFrame, frame_for, uniform01
from privhist.federated.user_data import UserCounts, generate_heterogeneous, generate_iid


def load(name: str, n: int, d: int, s: Settings) -> UserCounts:
    """One dataset with ``d`` items (synthetic: ``n`` users; real: at most ``max_users``, a seeded
    random subset)."""
    rng = SeededRandom(_common.derived_seed(s.seed, "data", name, n, d))
    if name == "iid":
        return generate_iid(n, d, rng)
    if name == "hetero":
        return generate_heterogeneous(n, d, rng)
    if name == "msweb":
        users = read_msweb(s.data_dir / REAL_FILES["msweb"], d)
    elif name == "retail":
        users = read_user_counts(
            s.data_dir / REAL_FILES["retail"], user=True, format="fimi", top_d=d
        )
    else:
        raise InputDataError(f"unknown dataset {name!r}")
    cap = min(s.max_users, n)
    if users.n_users > cap:
        order = np.argsort(uniform01(rng, users.n_users), kind="stable")[:cap]
        users = users.subset(np.sort(order))
    return users


def experiment_frame(d: int, s: Settings) -> TightFrame:
    """The public frame for ``d`` items, seeded by ``d`` only (every table with the same ``d``
    uses the same frame): the library's automatic choice,
    :func:`privhist.federated.kashin.frame_for`
    (the paper's orthogonal frame with ``D = 2d`` for the paper's ``d = 50, 100``, a randomised
    Hadamard frame with ``D = 2048`` for ``d = 1000``)."""
    return frame_for(d, SeededRandom(_common.derived_seed(s.seed, "frame", d)))
