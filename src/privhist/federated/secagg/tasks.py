"""Federated tasks run over secure aggregation: what each client computes, what the server
releases, one secure sum (or several) at a time.

A :class:`Task` is built from public parameters only (the same on the server and on every
client). The server asks it for the next secure sum (:meth:`Task.next_round`, a
:class:`RoundSpec`: modulus, dimension and public ``info``), feeds it each sum, and finally
asks for the release. A client computes its input for a round with :meth:`Task.client_vector`
from its own data and randomness. Clients that dropped out of one round take no part in the
next (the server knows who finished, ``U_5``).

* ``sample-threshold``: Bharadwaj & Cormode (2022), Sections 2-3, with the aggregator replaced
  by a secure sum. Client ``i`` holds one item of a public dictionary ``0 .. S - 1``; it samples
  itself with an exact Bernoulli(``p``) coin and sends the one-hot vector of its item if sampled,
  the zero vector otherwise (so the server does not even learn who was sampled). The server
  releases the items whose count reaches ``tau``. Privacy: the mechanism's ``(epsilon, delta)``
  for add/remove of one client, as in :mod:`privhist.federated.sample_threshold`.
* ``tffe``: Algorithm 6 of the federated frequency estimation paper (TFFE; see
  :mod:`privhist.federated.ffe`): round 1 sums the DHT of each client's Kashin-norm (Algorithm 4)
  and the server sets the clip ``C_hat`` (Algorithm 5); round 2 sums each client's cPBM encoding
  ``(theta, m, C_hat)`` (Algorithms 1-3) and the server decodes ``x_hat``. ``(m, m')`` come from
  :func:`~privhist.federated.ffe.calibrate_tffe` for ``min_contributors`` clients (default:
  every planned client), stated before the first round: the rounds abort when fewer contribute,
  and the guarantee is recomputed (Proposition 4) for the clients that actually contributed; a
  release whose guarantee would exceed the requested ``(epsilon, delta)`` is refused
  (:func:`check_guarantee`), never published.
* ``sum``: every client sends a uniformly random vector mod ``q`` (tests and benchmarks).

Client data here is synthetic, drawn by each client from its own data seed (``data_seed``,
public-ish: it stands for the client's local data, not for privacy randomness).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ProtocolAbort, ValidationError
from privhist.core.random import RandomSource, SecureRandom, SeededRandom
from privhist.federated.secagg.aggregator import VARIANTS, run_in_process
from privhist.federated.secagg.protocol import RoundConfig, default_neighbours, default_threshold

I64 = npt.NDArray[np.int64]

#: ids are below 2**20; per-client sources are derived as seed * 2**22 + purpose * 2**20 + id
_ID_BITS = 20


def derived_seed(seed: int, purpose: int, client: int) -> int:
    """A distinct reproducible seed per (seed, purpose, client)."""
    return (int(seed) << (_ID_BITS + 2)) + (purpose << _ID_BITS) + int(client)


def data_source(data_seed: int, client: int) -> RandomSource:
    """The source of client ``client``'s synthetic local data."""
    return SeededRandom(derived_seed(data_seed, 0, client))


@dataclass(frozen=True)
class RoundSpec:
    """One secure sum a task asks for: ``modulus``, ``dimension`` and public ``info``."""

    index: int
    modulus: int
    dimension: int
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "modulus": self.modulus,
            "dimension": self.dimension,
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, obj: Any) -> RoundSpec:
        return cls(int(obj["index"]), int(obj["modulus"]), int(obj["dimension"]), obj["info"])


class GuaranteeRefused(ProtocolAbort):
    """A release whose realised privacy guarantee exceeds the requested one (never published)."""


def check_guarantee(
    requested: tuple[float, float], realised: tuple[float, float], what: str
) -> None:
    """Refuse (:class:`GuaranteeRefused`) a release whose realised ``(epsilon, delta)`` exceeds
    the requested one in either coordinate; ``what`` says whose release and why it moved
    (e.g. the contributors after dropouts). Call it before anything is published.

    >>> check_guarantee((1.0, 1e-6), (0.9, 1e-6), "x")
    >>> try:
    ...     check_guarantee((16.0, 1e-3), (18.28, 1e-3), "tffe over 6 contributors")
    ... except GuaranteeRefused as e:
    ...     print(str(e)[:60])
    release refused: tffe over 6 contributors would be (18.28, 0
    """
    (eps, delta), (r_eps, r_delta) = requested, realised
    if r_eps > eps or r_delta > delta:
        raise GuaranteeRefused(
            f"release refused: {what} would be ({r_eps:.6g}, {r_delta:.3g})-DP, above the "
            f"requested ({eps:.6g}, {delta:.3g})"
        )


#: most clients a task takes (client ids are below 2**20)
MAX_TASK_CLIENTS = 1 << 20


def _param(
    params: Mapping[str, Any], name: str, lo: float, hi: float, fn: str, kind: type = int
) -> Any:
    value = params[name]
    ok = not isinstance(value, bool) and isinstance(value, int | float if kind is float else int)
    if not ok or not lo <= value <= hi:
        what = "an integer" if kind is int else "a number"
        raise ValidationError(name, fn, f"{what} in [{lo:g}, {hi:g}]", value)
    return kind(value)


class Task(ABC):
    """A federated computation over secure sums (module notes)."""

    name: str

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = dict(params)
        fn = type(self).__name__
        self.clients = _param(self.params, "clients", 2, MAX_TASK_CLIENTS, fn)
        mc = self.params.get("min_contributors")
        if mc is not None:
            _param(self.params, "min_contributors", 2, self.clients, fn)
        self.sums: list[I64] = []
        self.contributors: list[int] = []

    def min_contributors(self) -> int:
        """Masked inputs every round needs before it unmasks (public, fixed before the first
        round): the ``min_contributors`` parameter, by default a majority of the planned
        clients."""
        mc = self.params.get("min_contributors")
        return self.clients // 2 + 1 if mc is None else int(mc)

    @abstractmethod
    def round_shapes(self) -> list[tuple[int, int]]:
        """``(modulus, dimension)`` of every round, known before the first (message bounds)."""

    @abstractmethod
    def next_round(self) -> RoundSpec | None:
        """The next secure sum, or None when the release can be made."""

    @abstractmethod
    def client_vector(self, spec: RoundSpec, client: int, rng: RandomSource) -> I64:
        """Client ``client``'s input for ``spec`` (its data comes from ``data_seed``)."""

    @abstractmethod
    def release(self) -> dict[str, Any]:
        """The final release (JSON-serialisable)."""

    def record(self, total: I64, contributors: int) -> None:
        """Feed the server one secure sum and how many inputs it summed."""
        self.sums.append(np.asarray(total, dtype=np.int64))
        self.contributors.append(int(contributors))


class SumTask(Task):
    """Every client sends a uniform vector mod ``modulus`` (drawn from its data seed)."""

    name = "sum"

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        fn = type(self).__name__
        _param(self.params, "modulus", 2, 1 << 62, fn)
        _param(self.params, "dimension", 1, 1 << 20, fn)

    def round_shapes(self) -> list[tuple[int, int]]:
        return [(int(self.params["modulus"]), int(self.params["dimension"]))]

    def next_round(self) -> RoundSpec | None:
        if self.sums:
            return None
        return RoundSpec(0, int(self.params["modulus"]), int(self.params["dimension"]))

    def client_vector(self, spec: RoundSpec, client: int, rng: RandomSource) -> I64:
        src = data_source(int(self.params["data_seed"]), client)
        return src.uniform_below(spec.modulus, spec.dimension)

    def release(self) -> dict[str, Any]:
        return {"sum": self.sums[0].tolist(), "contributors": self.contributors[0]}


def _zipf_item(support: int, exponent: float, src: RandomSource) -> int:
    w = 1.0 / np.arange(1, support + 1) ** exponent
    cdf = np.cumsum(w / w.sum())
    u = float(src.uniform_below(1 << 53, 1)[0]) / float(1 << 53)
    return min(int(np.searchsorted(cdf, u, side="right")), support - 1)


class SampleThresholdTask(Task):
    """A sample-and-threshold round over a secure sum (module notes)."""

    name = "sample-threshold"

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

        p = self.params
        rate = p.get("sampling_rate")
        self.mechanism = SampleAndThreshold(
            float(p["epsilon"]),
            float(p["delta"]),
            sampling_rate=None if rate is None else float(rate),
            threshold=p.get("threshold"),
        )
        self.support = _param(p, "support", 1, 1 << 20, type(self).__name__)

    def round_shapes(self) -> list[tuple[int, int]]:
        return [(self.clients + 1, self.support)]

    def next_round(self) -> RoundSpec | None:
        if self.sums:
            return None
        return RoundSpec(0, self.clients + 1, self.support)

    def item_of(self, client: int) -> int:
        """Client ``client``'s item (its synthetic local datum)."""
        src = data_source(int(self.params["data_seed"]), client)
        return _zipf_item(self.support, float(self.params.get("exponent", 1.1)), src)

    def client_vector(self, spec: RoundSpec, client: int, rng: RandomSource) -> I64:
        from privhist.noise import bernoulli_rational

        p: Fraction = self.mechanism.sampling_rate
        out = np.zeros(spec.dimension, dtype=np.int64)
        if bool(bernoulli_rational(p.numerator, p.denominator, rng)):
            out[self.item_of(client)] = 1
        return out

    def release(self) -> dict[str, Any]:
        from privhist.federated.sample_threshold import Aggregator, Messages

        counts = self.sums[0]
        msgs = Messages(np.arange(self.support), counts)
        rel = Aggregator(self.mechanism).release(msgs, SeededRandom(0))
        g = rel.metadata["guarantee"]
        return {
            "task": self.name,
            "keys": rel.keys.tolist(),
            "values": np.asarray(rel.values).tolist(),
            "estimates": [float(v) for v in np.asarray(rel.estimates).tolist()],
            "sampling_rate": float(self.mechanism.sampling_rate),
            "threshold": self.mechanism.threshold,
            "guarantee": g["statement"],
            "contributors": self.contributors[0],
        }


class TffeTask(Task):
    """TFFE (Algorithm 6) as two secure sums (module notes)."""

    name = "tffe"

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        from privhist.federated import ffe
        from privhist.federated.dht import FederatedQuantile
        from privhist.federated.kashin import OrthogonalFrame
        from privhist.federated.ocpbm import optimal_quantile

        p = self.params
        fn = type(self).__name__
        self.d = _param(p, "dimension", 1, 1024, fn)
        self.D = int(p.get("frame_dimension", 2 * self.d))
        self.frame = OrthogonalFrame(self.d, self.D, SeededRandom(int(p.get("frame_seed", 0))))
        self.theta = float(p.get("theta", 0.2))
        self.bits = int(p.get("bits", 4))
        self.max_items = int(p.get("max_items", 10))
        if "m" in p and "m_quantile" in p:  # calibrated by the server, sent as public params
            self.m, self.m_quantile = int(p["m"]), int(p["m_quantile"])
        else:
            # calibrated for the fewest contributors the rounds accept (module notes)
            cal = ffe.calibrate_tffe(
                float(p["epsilon"]),
                float(p["delta"]),
                self.min_contributors(),
                self.D,
                bits=self.bits,
                theta=self.theta,
            )
            self.m, self.m_quantile = cal.m, cal.m_quantile
            self.params.update(m=self.m, m_quantile=self.m_quantile)
        self.gamma = optimal_quantile(self.D, self.m, self.clients, self.theta)
        self.upper = ffe.range_upper(self.max_items)
        self.dht = FederatedQuantile(
            self.upper, self.bits, self.theta, self.m_quantile, self.clients, "dht"
        )
        self.clip: float | None = None

    def min_contributors(self) -> int:
        """Every planned client unless ``min_contributors`` says fewer (the calibration's
        ``n``)."""
        mc = self.params.get("min_contributors")
        return self.clients if mc is None else int(mc)

    def round_shapes(self) -> list[tuple[int, int]]:
        from privhist.federated.cpbm import secure_sum_modulus

        return [
            (secure_sum_modulus(self.clients, self.m_quantile), self.dht.dimension),
            (secure_sum_modulus(self.clients, self.m), self.D),
        ]

    def counts_of(self, client: int) -> npt.NDArray[np.float64]:
        """Client ``client``'s count vector (``max_items`` Zipf items over ``d`` keys)."""
        src = data_source(int(self.params["data_seed"]), client)
        x = np.zeros(self.d, dtype=np.float64)
        for _ in range(self.max_items):
            x[_zipf_item(self.d, 1.0, src)] += 1.0
        return x

    def next_round(self) -> RoundSpec | None:
        from privhist.federated.cpbm import secure_sum_modulus

        if not self.sums:
            modulus = secure_sum_modulus(self.clients, self.m_quantile)
            return RoundSpec(0, modulus, self.dht.dimension)
        if len(self.sums) == 1:
            from dataclasses import replace

            dht = replace(self.dht, n_users=self.contributors[0])
            self.clip = dht.quantile(self.sums[0], self.gamma)
            modulus = secure_sum_modulus(self.clients, self.m)
            return RoundSpec(1, modulus, self.D, {"clip": self.clip})
        return None

    def client_vector(self, spec: RoundSpec, client: int, rng: RandomSource) -> I64:
        from privhist.federated.cpbm import Cpbm

        y = self.frame.analyze(self.counts_of(client)[None, :])
        if spec.index == 0:
            norm = np.linalg.norm(y, axis=1)
            return np.asarray(self.dht.encode(norm, rng)[0], dtype=np.int64)
        mech = Cpbm(
            theta=self.theta,
            m=self.m,
            clip=float(spec.info["clip"]),
            dimension=self.D,
            n_users=self.clients,
        )
        return np.asarray(mech.encode(y, rng)[0], dtype=np.int64)

    def release(self) -> dict[str, Any]:
        from privhist.federated import ffe
        from privhist.federated.cpbm import cpbm_decode

        n_eff = min(self.contributors)
        assert self.clip is not None
        y_hat = cpbm_decode(self.sums[1], self.contributors[1], self.m, self.theta, self.clip)
        x_hat = np.asarray(self.frame.synthesize(y_hat[None, :])[0])
        rdp = ffe.tffe_rdp(n_eff, self.theta, self.m, self.D, self.m_quantile, self.bits)
        delta = float(self.params["delta"])
        planned = self.min_contributors()
        check_guarantee(
            (float(self.params["epsilon"]), delta),
            (rdp.epsilon(delta), delta),
            f"tffe over {n_eff} contributing clients (calibrated for at least {planned}; "
            "state fewer with min_contributors to calibrate for dropouts)",
        )
        return {
            "task": self.name,
            "estimate": [float(v) for v in x_hat.tolist()],
            "clip": self.clip,
            "m": self.m,
            "m_quantile": self.m_quantile,
            "contributors": list(self.contributors),
            "epsilon": rdp.epsilon(delta),
            "delta": delta,
            "epsilon_planned": float(self.params["epsilon"]),
            "guarantee": f"({rdp.epsilon(delta):.6g}, {delta:.3g})-DP at user level over the "
            f"{n_eff} contributing clients (Proposition 4; {self.clients} planned, calibrated "
            f"for at least {planned})",
        }


TASKS: dict[str, type[Task]] = {
    SumTask.name: SumTask,
    SampleThresholdTask.name: SampleThresholdTask,
    TffeTask.name: TffeTask,
}


def make_task(name: str, params: dict[str, Any]) -> Task:
    """The task called ``name`` built from public ``params``."""
    if name not in TASKS:
        raise ValidationError("task", "make_task", f"one of {sorted(TASKS)}", name)
    return TASKS[name](params)


def noise_source(seed: int | None, client: int) -> RandomSource:
    """Client ``client``'s source for its task randomness (sampling coins, cPBM): seeded from
    ``seed`` (reproducible, NOT private) or the operating system's CSPRNG."""
    if seed is None:
        return SecureRandom()
    return SeededRandom(derived_seed(seed, 1, client))


def round_config(
    spec: RoundSpec,
    clients: list[int],
    variant: str,
    *,
    session: int = 0,
    planned: int | None = None,
    threshold: int | None = None,
    neighbours: int | None = None,
    min_contributors: int = 0,
) -> RoundConfig:
    """The protocol parameters of one task round among ``clients``; the degree and threshold
    come from the ``planned`` population (default: ``len(clients)``), so fewer clients never
    lower them. Raises :class:`~privhist.core.errors.ProtocolAbort` when ``clients`` cannot meet
    the threshold or ``min_contributors``."""
    n = len(clients) if planned is None else planned
    if variant not in VARIANTS:
        raise ValidationError("variant", "round_config", f"one of {list(VARIANTS)}", variant)
    k = 0 if variant == "secagg" else (default_neighbours(n) if neighbours is None else neighbours)
    t = default_threshold(n, k) if threshold is None else threshold
    need = max(t, min_contributors) if isinstance(t, int) else 0
    if need > len(clients):
        raise ProtocolAbort(
            f"round {spec.index} refused: {len(clients)} clients are available; it needs {need}"
        )
    rid = (session << 8) + spec.index
    return RoundConfig(
        rid, spec.modulus, spec.dimension, tuple(sorted(clients)), t, k, min_contributors
    )


def run_task_in_process(
    task: Task,
    variant: str,
    seed: int | None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    *,
    threshold: int | None = None,
    neighbours: int | None = None,
) -> dict[str, Any]:
    """Run every round of ``task`` with in-process clients (the reference for the networked
    runtime: the same seeds and dropouts give the same release). ``dropouts`` apply to the first
    round; a client that did not finish a round takes no part in the next."""
    alive = list(range(task.clients))
    rngs = {u: noise_source(seed, u) for u in alive}
    first = True
    while (spec := task.next_round()) is not None:
        config = round_config(
            spec,
            alive,
            variant,
            planned=task.clients,
            threshold=threshold,
            neighbours=neighbours,
            min_contributors=task.min_contributors(),
        )
        vectors = {u: task.client_vector(spec, u, rngs[u]) for u in alive}
        out = run_in_process(
            config, vectors, lambda _u: SecureRandom(), SecureRandom(), dropouts if first else None
        )
        if not out.ok:
            raise ProtocolAbort(f"round {spec.index} aborted: {out.server.reason}")
        task.record(out.server.result, len(out.server.survivors["masked"]))
        alive = out.server.survivors["unmask"]
        first = False
    return task.release()
