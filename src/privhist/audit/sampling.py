"""Drawing outputs for the statistical audit: neighbouring pairs, samplers and features.

A *dataset* here is a histogram input: a mapping ``key -> number of records`` (for user-level
relations the number of units is the fewest that can hold the records, ``ceil(count / c)``, as in
the contract tests). A :class:`NeighbouringPair` is two datasets one neighbouring step apart.

A *sampler* draws ``n`` independent outputs of a mechanism on one dataset and turns each into a
row of integer *features* over the pair's keys, two columns per key: ``floor(value)`` (or
:data:`NOT_RELEASED_CODE`) and the exponent of the value's lowest set bit, capped at 0 (0 for
every integer; a float's binary resolution, which is what floating-point attacks on the Laplace
mechanism read, Mironov 2012, "On significance of the least significant bits for differential
privacy", CCS 2012).

* :class:`MechanismSampler` — a privhist mechanism. Every built-in mechanism listed in
  :data:`PER_KEY_INDEPENDENT` draws each key independently of the others (see
  :mod:`privhist.accounting.profile`, "Product mechanisms"), so ``n`` outputs on a dataset with
  ``m`` keys are one release on ``n m`` keys ``(copy, key)``: vectorised, no per-sample loop.
  Other mechanisms are released once per sample (reported as such).
* :class:`CallableSampler` — any ``f(records) -> output`` (a peer library, a user's function):
  called once per sample; ``records`` is the list of keys, one entry per record; the output is a
  mapping ``key -> value``, a :class:`~privhist.io.release.Release`, or an iterable of released
  keys. A function named on the command line (``privhist audit sample --function
  MODULE:FUNCTION``, :func:`load_function`) must be marked with :func:`audit_sampler`: the audit
  calls it many times with lists of records, so it never calls a function that was not written
  for that (``os:system`` is refused, not run).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import PrivhistError, UnsupportedError, ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource
from privhist.io.release import Release
from privhist.mechanisms.base import Mechanism

__all__ = [
    "NOT_RELEASED_CODE",
    "PER_KEY_INDEPENDENT",
    "CallableSampler",
    "MechanismSampler",
    "NeighbouringPair",
    "Sampler",
    "audit_sampler",
    "describe_row",
    "features",
    "load_function",
]

IntArray = npt.NDArray[np.int64]
Dataset = Mapping[Any, int]
Progress = Callable[[int], None]

#: feature code of "this key was not released"
NOT_RELEASED_CODE = np.iinfo(np.int64).min
#: mechanisms whose release draws every key independently of every other key
PER_KEY_INDEPENDENT = frozenset(
    {
        "basic-geometric",
        "dense",
        "optimal-selection",
        "pws",
        "sample-and-threshold",
        "stability",
        "stability-geometric",
    }
)
#: outputs drawn per release call when vectorised (bounds memory)
CHUNK = 250_000


@dataclass(frozen=True)
class NeighbouringPair:
    """Two datasets one neighbouring step apart, and why this pair was chosen."""

    first: Mapping[Any, int]
    second: Mapping[Any, int]
    note: str = ""

    @property
    def keys(self) -> list[Hashable]:
        return sorted({*self.first, *self.second}, key=str)

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": {str(k): v for k, v in self.first.items()},
            "second": {str(k): v for k, v in self.second.items()},
            "note": self.note,
        }


def single_key_pair(n0: int, n1: int, note: str = "") -> NeighbouringPair:
    """Key ``"x"`` with ``n0`` records against ``n1`` records (0 means absent)."""
    first = {"x": n0} if n0 else {}
    second = {"x": n1} if n1 else {}
    return NeighbouringPair(first, second, note or f"x: {n0} vs {n1} records")


def _lsb_exponent(v: npt.NDArray[np.float64]) -> IntArray:
    """Exponent of the lowest set bit of each finite float, capped at 0 (0 for integers)."""
    m, e = np.frexp(v)
    mant = np.abs(m * 2.0**53).astype(np.int64)
    low = mant & -mant
    tz = np.zeros(mant.shape, dtype=np.int64)
    nz = low > 0
    tz[nz] = np.round(np.log2(low[nz].astype(np.float64))).astype(np.int64)
    out = np.where(nz, e.astype(np.int64) - 53 + tz, 0)
    return np.minimum(out, 0)


def features(values: npt.NDArray[Any], released: npt.NDArray[np.bool_]) -> IntArray:
    """Feature columns for one key: ``(floor(value) or NOT_RELEASED_CODE, lsb exponent)``.

    >>> features(np.array([3.0, 0.75, 0.0]), np.array([True, True, False])).tolist()
    [[3, 0], [0, -2], [-9223372036854775808, 1]]
    """
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    lim = 2.0**62
    floor = np.floor(np.clip(np.where(finite, v, 0.0), -lim, lim)).astype(np.int64)
    lsb = _lsb_exponent(np.where(finite, v, 0.0))
    col0 = np.where(released, floor, NOT_RELEASED_CODE)
    col1 = np.where(released, lsb, 1)
    return np.stack([col0, col1], axis=1).astype(np.int64)


def describe_row(keys: Sequence[Hashable]) -> Callable[[IntArray], str]:
    """A function naming one feature row, e.g. ``x=12`` or ``x=absent`` (for reports)."""

    def name(row: IntArray) -> str:
        parts = []
        for i, k in enumerate(keys):
            v, lsb = int(row[2 * i]), int(row[2 * i + 1])
            if v == NOT_RELEASED_CODE:
                parts.append(f"{k}=absent")
            elif lsb < 0:
                parts.append(f"{k} in [{v},{v + 1}) at 2^{lsb}")
            else:
                parts.append(f"{k}={v}")
        return ",".join(parts)

    return name


class Sampler(Protocol):
    """Draws ``n`` outputs on ``dataset`` as feature rows over ``keys``."""

    name: str
    vectorised: bool

    def draw(
        self,
        dataset: Dataset,
        keys: Sequence[Hashable],
        n: int,
        rng: RandomSource,
        progress: Progress | None = None,
    ) -> IntArray: ...


def _counts_for(nb: Neighbouring, keys: Any, counts: Sequence[int]) -> Counts:
    if nb.relation is Relation.USER:
        c = nb.max_contributions_per_partition
        units = [-(-int(n) // c) for n in counts]
        return Counts.from_arrays(np.asarray(keys), counts, units, neighbouring=nb)
    return Counts.from_arrays(np.asarray(keys), counts)


@dataclass
class MechanismSampler:
    """Outputs of a privhist mechanism (vectorised when it draws keys independently)."""

    mechanism: Mechanism
    name: str = ""
    vectorised: bool = field(init=False)

    def __post_init__(self) -> None:
        m = self.mechanism
        if not isinstance(m, Mechanism):
            raise ValidationError("mechanism", "MechanismSampler", "a privhist Mechanism", m)
        if m.output_formats is not None:
            raise UnsupportedError(
                f"audit: {m.name} releases a compact polynomial, not rows; audit it with "
                "'privhist audit exact' (its rows cannot be sampled as outputs)"
            )
        self.name = self.name or m.name
        self.vectorised = m.name in PER_KEY_INDEPENDENT

    def draw(
        self,
        dataset: Dataset,
        keys: Sequence[Hashable],
        n: int,
        rng: RandomSource,
        progress: Progress | None = None,
    ) -> IntArray:
        m = len(keys)
        out = np.empty((n, 2 * m), dtype=np.int64)
        counts = [int(dataset.get(k, 0)) for k in keys]
        if self.vectorised:
            done = 0
            while done < n:
                size = min(CHUNK, n - done)
                out[done : done + size] = self._draw_batch(counts, size, rng)
                done += size
                if progress is not None:
                    progress(size)
            return out
        index = {k: i for i, k in enumerate(keys)}
        mech = self.mechanism
        if mech.needs_domain:  # the pair's keys are the public domain, as in the batched draw
            mech = copy.copy(mech)
            mech.domain = np.unique(np.asarray(keys))  # type: ignore[attr-defined]
        data = _counts_for(mech.neighbouring, keys, counts)
        for j in range(n):
            rel = mech.release(data, rng)
            released = np.zeros(m, dtype=np.bool_)
            values = np.zeros(m, dtype=np.float64)
            for t, key in enumerate(rel.keys.tolist()):
                i = index.get(key)
                if i is None:
                    continue  # a key outside the data (pure-sparse universe): not a pair key
                released[i] = True
                if rel.values is not None:
                    values[i] = float(rel.values[t])
            out[j] = features(values, released).reshape(-1)
            if progress is not None and (j + 1) % 1000 == 0:
                progress(1000)
        return out

    def _draw_batch(self, counts: list[int], size: int, rng: RandomSource) -> IntArray:
        """One release over ``size * m`` keys: key ``j * m + i`` is copy ``j`` of key ``i``."""
        m = len(counts)
        mech = self.mechanism
        all_keys = np.arange(size * m, dtype=np.int64)
        all_counts = np.tile(np.asarray(counts, dtype=np.int64), size)
        if mech.needs_domain:
            mech = copy.copy(mech)
            mech.domain = all_keys  # type: ignore[attr-defined]
        rel = mech.release(_counts_for(mech.neighbouring, all_keys, all_counts.tolist()), rng)
        released = np.zeros(size * m, dtype=np.bool_)
        values = np.zeros(size * m, dtype=np.float64)
        idx = rel.keys.astype(np.int64)
        released[idx] = True
        if rel.values is not None:
            values[idx] = rel.values.astype(np.float64)
        return features(values, released).reshape(size, 2 * m)


class CallableSampler:
    """Outputs of any ``f(records) -> output``, one call per sample (timed by the caller)."""

    vectorised = False

    def __init__(self, function: Callable[[list[Hashable]], Any], name: str = "") -> None:
        if not callable(function):
            raise ValidationError("function", "CallableSampler", "a callable", function)
        self.function = function
        self.name = name or getattr(function, "__name__", "function")

    def draw(
        self,
        dataset: Dataset,
        keys: Sequence[Hashable],
        n: int,
        rng: RandomSource,
        progress: Progress | None = None,
    ) -> IntArray:
        records: list[Hashable] = [k for k, c in dataset.items() for _ in range(int(c))]
        m = len(keys)
        index = {k: i for i, k in enumerate(keys)}
        out = np.empty((n, 2 * m), dtype=np.int64)
        step = max(1, min(1000, n // 100))
        for j in range(n):
            released = np.zeros(m, dtype=np.bool_)
            values = np.zeros(m, dtype=np.float64)
            for key, value in _as_mapping(self._call(records), self.name).items():
                i = index.get(key)
                if i is None:
                    continue
                released[i] = True
                values[i] = value
            out[j] = features(values, released).reshape(-1)
            if progress is not None and (j + 1) % step == 0:
                progress(step)
        return out

    def _call(self, records: list[Hashable]) -> Any:
        """One call on a copy of ``records``; an exception it raises becomes a typed error."""
        try:
            return self.function(list(records))
        except Exception as exc:  # the function is the caller's; its failure is bad input
            if isinstance(exc, PrivhistError):
                raise
            raise ValidationError(
                "function",
                self.name,
                "a function that maps a list of records to its output",
                f"one that raised {type(exc).__name__} ({exc}) on {len(records)} record(s)",
            ) from exc


def _as_mapping(output: Any, name: str) -> dict[Hashable, float]:
    if isinstance(output, Release):
        vals = output.values
        keys = output.keys.tolist()
        if vals is None:
            return dict.fromkeys(keys, 0.0)
        return {k: float(v) for k, v in zip(keys, vals.tolist(), strict=True)}
    if isinstance(output, Mapping):
        out = {}
        for k, v in output.items():
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                raise ValidationError(
                    "output", name, "a mapping key -> number", f"{k!r}: {v!r}"
                ) from None
        return out
    if isinstance(output, Iterable) and not isinstance(output, str | bytes):
        return dict.fromkeys(output, 0.0)
    raise ValidationError(
        "output", name, "a mapping key -> value, a Release or an iterable of keys", output
    )


def timed_draw(
    sampler: Sampler,
    dataset: Dataset,
    keys: Sequence[Hashable],
    n: int,
    rng: RandomSource,
    progress: Progress | None = None,
) -> tuple[IntArray, float]:
    """``sampler.draw`` and the seconds it took."""
    t0 = time.perf_counter()
    rows = sampler.draw(dataset, keys, n, rng, progress)
    return rows, time.perf_counter() - t0


def rate(n: int, seconds: float) -> float:
    """Samples per second (inf when too fast to time)."""
    return n / seconds if seconds > 0 else math.inf


_MARK = "__privhist_audit_sampler__"

F = TypeVar("F", bound=Callable[..., Any])


def audit_sampler(function: F) -> F:
    """Mark ``function`` (``f(records) -> output``, module notes) as one that ``privhist audit
    sample --function MODULE:FUNCTION`` may call.

    >>> from privhist.core.random import SeededRandom
    >>> @audit_sampler
    ... def exact_counts(records):
    ...     return {r: records.count(r) for r in set(records)}
    >>> CallableSampler(exact_counts).draw({"x": 2}, ["x"], 1, SeededRandom(0)).tolist()
    [[2, 0]]
    """
    if not callable(function):
        raise ValidationError("function", "audit_sampler", "a function", function)
    setattr(function, _MARK, True)
    return function


def load_function(spec: str) -> Callable[[list[Hashable]], Any]:
    """The function named ``module:function`` (e.g. ``mypkg.release:noisy_counts``), which must
    be marked with :func:`audit_sampler`.

    Raises:
        ValidationError: ``spec`` is not ``MODULE:FUNCTION``, the module cannot be imported, or
            it names no function marked with :func:`audit_sampler`.
    """
    import importlib

    fn = "audit sample"
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValidationError("--function", fn, "MODULE:FUNCTION", spec)
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValidationError("--function", fn, "an importable module", f"{spec} ({exc})") from None
    f = getattr(mod, name, None)
    if not callable(f):
        raise ValidationError("--function", fn, f"a function defined in {module}", spec)
    if getattr(f, _MARK, False) is not True:
        raise ValidationError(
            "--function",
            fn,
            "a function f(records) -> {key: value}, a Release or keys, marked with "
            "@privhist.audit.audit_sampler",
            f"{spec}, which is not marked",
        )
    return f  # type: ignore[no-any-return]
