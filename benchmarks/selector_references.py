"""Float-noise reference implementations of the published user-level key selectors.

These are what the benchmark compares privhist's user-level defaults with; no library ships
them. Each follows its paper (and, where the paper leaves a detail open, the authors' public
code, read for facts only): continuous noise from NumPy, thresholds from the papers' formulas.
They are benchmark references, not releases (float noise, no exactness).

* **WGM**: Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin (2020), "Differentially Private
  Set Union", ICML, the weighted Gaussian mechanism: every user keeps a random subset of at most
  ``Delta0`` keys, each weighing ``1 / sqrt(|S|)``; Gaussian noise ``sigma`` of the analytic
  Gaussian mechanism (Balle & Wang 2018) at ``(epsilon, delta / 2)`` and sensitivity 1; threshold
  ``rho = max_(t <= Delta0) 1 / sqrt(t) + sigma Phi^-1((1 - delta / 2)^(1 / t))``.
* **DP-SIPS**: Swanberg, Desfontaines & Haney (2023), arXiv:2301.01998: ``R`` rounds of WGM,
  released keys removed from every user between rounds; here the rounds' Gaussian budgets
  ``1 / sigma_r**2`` are in ratio ``q`` (the same split as privhist's ``dp-sips``) and compose
  exactly as Gaussian mechanisms (``mu**2 = sum_r 1 / sigma_r**2``, ``delta_G(epsilon; mu) =
  delta / 2``); each round's threshold takes ``delta / (2 R)``.
* **Policy Laplace** and **policy Gaussian**: Gopi et al. (2020), Section 5: users in a random
  order each push at most ``Delta0`` of their keys toward the cutoff ``Gamma = rho + alpha
  param``: Laplace by equal raises that stop at ``Gamma`` (an L1 budget of 1), Gaussian along the
  gap vector (an L2 step of at most 1); then Laplace (scale ``1 / epsilon``) or Gaussian noise on
  every key someone holds, and the threshold ``rho`` (Laplace: ``max_t 1 / t + (1 / epsilon)
  ln(1 / (2 (1 - (1 - delta)^(1 / t))))``; Gaussian: WGM's).
* **Policy greedy**: Carvalho, Wang & Gondara (2022), "Incorporating item frequency for
  differentially private set union", AAAI: users in a random order; each fills its keys below
  ``Gamma``, one after the other, up to ``Gamma`` with an L1 budget of 1 (no cap on the keys a
  user holds); keys of a user in decreasing local frequency, here all ties (set-valued data), so
  in a random order; Laplace noise ``1 / epsilon`` on every key someone holds and the threshold
  ``rho = 1 + ln(1 / (2 delta)) / epsilon``, as published. That threshold covers one key only
  the added user holds; the zero-weight keys it also holds are noised too and each crosses with
  probability ``delta exp(-epsilon)``, which the published bound leaves out (so this reference is
  if anything more generous than a sound version).

Data: :class:`UserSets`, users' distinct keys as integer indices (CSR arrays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy.stats import norm


@dataclass(frozen=True)
class UserSets:
    """Users' distinct keys: user ``u`` holds ``indices[indptr[u]:indptr[u + 1]]``."""

    indptr: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int64]
    labels: list[Any]

    @classmethod
    def of(cls, pairs: pl.DataFrame) -> UserSets:
        p = pairs.select("user", "key").unique()
        labels = p["key"].unique().sort().to_list()
        code = {k: i for i, k in enumerate(labels)}
        p = p.with_columns(idx=pl.col("key").replace_strict(code, return_dtype=pl.Int64)).sort(
            "user", "idx"
        )
        users = p["user"].to_numpy()
        starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
        indptr = np.r_[starts, len(users)].astype(np.int64)
        return cls(indptr, p["idx"].to_numpy().astype(np.int64), labels)

    @property
    def n_users(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_keys(self) -> int:
        return len(self.labels)

    def lists(self) -> list[list[int]]:
        ind = self.indices.tolist()
        p = self.indptr.tolist()
        return [ind[p[u] : p[u + 1]] for u in range(self.n_users)]


# -- calibration --------------------------------------------------------------------------------


def gaussian_delta(epsilon: float, mu: float) -> float:
    """The Gaussian privacy profile ``Phi(-e / mu + mu / 2) - exp(e) Phi(-e / mu - mu / 2)``."""
    return float(
        norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)
    )


def analytic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest ``sigma`` of the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8):
    ``delta_G(epsilon; sensitivity / sigma) <= delta``."""
    lo, hi = 1e-3, 1e3  # mu = sensitivity / sigma
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if gaussian_delta(epsilon, mid) <= delta:
            lo = mid
        else:
            hi = mid
    return sensitivity / lo


def gaussian_threshold(sigma: float, delta_t: float, cap: int) -> float:
    """``max_(t <= cap) 1 / sqrt(t) + sigma Phi^-1((1 - delta_t)^(1 / t))`` (Gopi et al.
    Thm 5.1)."""
    return max(
        1 / math.sqrt(t) + sigma * float(norm.isf(-math.expm1(math.log1p(-delta_t) / t)))
        for t in range(1, cap + 1)
    )


def laplace_threshold(epsilon: float, delta: float, cap: int) -> float:
    """``max_(t <= cap) 1 / t + (1 / epsilon) ln(1 / (2 (1 - (1 - delta)^(1 / t))))``."""
    return max(
        1 / t + math.log(1 / (2 * -math.expm1(math.log1p(-delta) / t))) / epsilon
        for t in range(1, cap + 1)
    )


# -- the selectors ------------------------------------------------------------------------------


def _kept(
    us: UserSets, cap: int, rng: np.random.Generator, alive: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Every user keeps a uniform random subset of at most ``cap`` of its keys still ``alive``;
    returns (key index, 1 / sqrt(kept)) per kept pair."""
    users = np.repeat(np.arange(us.n_users), np.diff(us.indptr))
    keys = us.indices
    m = alive[keys]
    users, keys = users[m], keys[m]
    order = np.lexsort((rng.random(keys.shape[0]), users))
    users, keys = users[order], keys[order]
    starts = (
        np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
        if users.size
        else np.zeros(0, np.int64)
    )
    sizes = np.diff(np.r_[starts, users.shape[0]])
    rank = np.arange(users.shape[0]) - np.repeat(starts, sizes)
    keep = rank < cap
    kept_sizes = np.minimum(sizes, cap)
    w = 1 / np.sqrt(np.repeat(kept_sizes, sizes).astype(np.float64))
    return keys[keep], w[keep]


def wgm(
    us: UserSets, epsilon: float, delta: float, cap: int, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Weighted Gaussian selection; returns the released key indices."""
    sigma = analytic_sigma(epsilon, delta / 2)
    rho = gaussian_threshold(sigma, delta / 2, cap)
    keys, w = _kept(us, cap, rng, np.ones(us.n_keys, dtype=bool))
    hist = np.bincount(keys, weights=w, minlength=us.n_keys)
    held = np.bincount(keys, minlength=us.n_keys) > 0
    noisy = hist + rng.normal(0, sigma, us.n_keys)
    return np.flatnonzero(held & (noisy > rho))


def dp_sips(
    us: UserSets,
    epsilon: float,
    delta: float,
    cap: int,
    rng: np.random.Generator,
    rounds: int = 3,
    ratio: float = 6.0,
) -> npt.NDArray[np.int64]:
    """DP-SIPS: ``rounds`` rounds of WGM, released keys removed between rounds."""
    lo, hi = 1e-3, 1e3
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if gaussian_delta(epsilon, mid) <= delta / 2:
            lo = mid
        else:
            hi = mid
    mu2 = lo * lo
    raw = [ratio**r for r in range(rounds)]
    sigmas = [1 / math.sqrt(mu2 * f / sum(raw)) for f in raw]
    alive = np.ones(us.n_keys, dtype=bool)
    out: list[npt.NDArray[np.int64]] = []
    for s in sigmas:
        rho = gaussian_threshold(s, delta / (2 * rounds), cap)
        keys, w = _kept(us, cap, rng, alive)
        hist = np.bincount(keys, weights=w, minlength=us.n_keys)
        held = np.bincount(keys, minlength=us.n_keys) > 0
        new = np.flatnonzero(held & (hist + rng.normal(0, s, us.n_keys) > rho))
        out.append(new)
        alive[new] = False
    return np.concatenate(out)


def policy_laplace(
    us: UserSets,
    epsilon: float,
    delta: float,
    cap: int,
    rng: np.random.Generator,
    alpha: float = 5.0,
) -> npt.NDArray[np.int64]:
    """Policy Laplace (Gopi et al. 2020): equal L1 raises toward ``Gamma``, stopping there."""
    rho = laplace_threshold(epsilon, delta, cap)
    gamma = rho + alpha / epsilon
    hist = [0.0] * us.n_keys
    held = np.zeros(us.n_keys, dtype=bool)
    lists = us.lists()
    for u in rng.permutation(us.n_users).tolist():
        ks = lists[u]
        if len(ks) > cap:
            ks = [ks[i] for i in rng.choice(len(ks), cap, replace=False)]
        for k in ks:
            held[k] = True
        gaps = sorted((gamma - hist[k], k) for k in ks if hist[k] < gamma)
        budget, n, raised = 1.0, len(gaps), 0.0
        for i, (g, _k) in enumerate(gaps):
            step = g - raised  # raise every remaining key by step to fill this one
            if step * (n - i) <= budget:
                budget -= step * (n - i)
                raised = g
            else:
                raised += budget / (n - i)
                break
        for g, k in gaps:
            hist[k] += min(g, raised)
    h = np.asarray(hist)
    noisy = h + rng.laplace(0, 1 / epsilon, us.n_keys)
    return np.flatnonzero(held & (noisy > rho))


def policy_gaussian(
    us: UserSets,
    epsilon: float,
    delta: float,
    cap: int,
    rng: np.random.Generator,
    alpha: float = 5.0,
) -> npt.NDArray[np.int64]:
    """Policy Gaussian (Gopi et al. 2020): an L2 step of at most 1 along the gap vector."""
    sigma = analytic_sigma(epsilon, delta / 2)
    rho = gaussian_threshold(sigma, delta / 2, cap)
    gamma = rho + alpha * sigma
    hist = np.zeros(us.n_keys)
    held = np.zeros(us.n_keys, dtype=bool)
    lists = us.lists()
    for u in rng.permutation(us.n_users).tolist():
        ks = lists[u]
        if len(ks) > cap:
            ks = [ks[i] for i in rng.choice(len(ks), cap, replace=False)]
        idx = np.asarray(ks, dtype=np.int64)
        held[idx] = True
        gap = np.maximum(gamma - hist[idx], 0.0)
        z = float(np.sqrt(gap @ gap))
        if z > 0:
            hist[idx] += min(1.0, z) * gap / z
    noisy = hist + rng.normal(0, sigma, us.n_keys)
    return np.flatnonzero(held & (noisy > rho))


def policy_greedy(
    us: UserSets, epsilon: float, delta: float, rng: np.random.Generator, alpha: float = 5.0
) -> npt.NDArray[np.int64]:
    """Policy greedy (Carvalho, Wang & Gondara 2022): fill keys to ``Gamma`` one at a time."""
    rho = 1 + math.log(1 / (2 * delta)) / epsilon
    gamma = rho + alpha / epsilon
    hist = [0.0] * us.n_keys
    held = np.zeros(us.n_keys, dtype=bool)
    lists = us.lists()
    for u in rng.permutation(us.n_users).tolist():
        ks = lists[u]
        held[ks] = True
        budget = 1.0
        for i in rng.permutation(len(ks)).tolist():
            k = ks[i]
            gap = gamma - hist[k]
            if gap <= 0:
                continue
            if gap < budget:
                hist[k] = gamma
                budget -= gap
            else:
                hist[k] += budget
                break
    h = np.asarray(hist)
    noisy = h + rng.laplace(0, 1 / epsilon, us.n_keys)
    return np.flatnonzero(held & (noisy > rho))


#: the references the benchmark sweeps: name -> (function, takes a cap)
REFERENCES = {
    "WGM": (wgm, True),
    "DP-SIPS": (dp_sips, True),
    "policy Laplace": (policy_laplace, True),
    "policy Gaussian": (policy_gaussian, True),
    "policy greedy": (policy_greedy, False),
}
