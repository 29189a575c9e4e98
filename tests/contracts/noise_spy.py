"""A spy on the exact samplers: every draw a release makes, with the parameter it was made at.

:class:`NoiseSpy` replaces the sampler functions of :mod:`privhist.noise` (and the integer
counting samplers of the finite mechanisms and the cPBM encoder, which draw without them) by
wrappers, in every ``privhist`` module that holds a reference to them, so it does not matter
which layer calls them or where the call moves to. Each outermost call is recorded as a
:class:`Draw` (calls a sampler makes to another inside itself are not), and may be answered by a
*script* instead of the sampler: a function of the draw returning the output array (or None for
a real draw), which lets a test place noisy values exactly at a threshold.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

# submodules by name: privhist.noise re-exports functions that shadow some of them
cpbm = importlib.import_module("privhist.federated.cpbm")
finite_geometric = importlib.import_module("privhist.mechanisms.finite.geometric")
bernoulli = importlib.import_module("privhist.noise.bernoulli")
binomial = importlib.import_module("privhist.noise.binomial")
gaussian = importlib.import_module("privhist.noise.gaussian")
geometric = importlib.import_module("privhist.noise.geometric")
laplace = importlib.import_module("privhist.noise.laplace")
exponential = importlib.import_module("privhist.noise.exponential")
permute_flip = importlib.import_module("privhist.noise.permute_flip")


@dataclass
class Draw:
    """One sampler call: ``sampler`` (its name), the noise ``parameter`` (a Fraction: Laplace
    scale, Gaussian variance, geometric rate, binomial success probability), ``size`` outputs,
    and sampler-specific ``extra`` (binomial trials, per-entry probabilities, the counting
    sampler object, cPBM trials and numerators)."""

    sampler: str
    parameter: Any
    size: int
    extra: dict[str, Any] = field(default_factory=dict)
    output: Any = None


Script = Callable[[Draw], Any]


def _shape_size(size: Any) -> int:
    return int(np.prod(size)) if isinstance(size, tuple) else int(size)


def _laplace(scale: Any, rng: Any, size: Any) -> Draw:
    return Draw("discrete_laplace", Fraction(scale), _shape_size(size))


def _laplace_threshold(scale: Any, counts: Any, threshold: Any, rng: Any) -> Draw:
    c = np.asarray(counts, dtype=np.int64)
    return Draw("discrete_laplace", Fraction(scale), int(c.size), {"threshold": int(threshold)})


def _kept_above(counts: Any, threshold: Any, noise: Any) -> Any:
    """What :func:`privhist.noise.laplace.laplace_threshold` returns when its full noise is
    scripted: the indices where counts plus that noise reach the threshold, and those values."""
    v = np.asarray(counts, dtype=np.int64) + np.asarray(noise, dtype=np.int64)
    hit = np.flatnonzero(v >= int(threshold))
    return hit, v[hit]


def _gaussian(sigma2: Any, rng: Any, size: Any) -> Draw:
    return Draw("discrete_gaussian", Fraction(sigma2), _shape_size(size))


def _geometric(x: Any, rng: Any, size: Any) -> Draw:
    return Draw("geometric", Fraction(x), _shape_size(size))


def _binomial(n: Any, p: Any, rng: Any, size: Any = None) -> Draw:
    trials = np.asarray(n, dtype=np.int64)
    count = trials.size if size is None else _shape_size(size)
    return Draw("binomial", Fraction(p), count, {"trials": trials})


def _binomial_half(m: Any, rng: Any) -> Draw:
    trials = np.asarray(m, dtype=np.int64)
    return Draw("binomial_half", Fraction(1, 2), trials.size, {"trials": trials})


def _bernoulli_rational(num: Any, den: Any, rng: Any, size: Any = None) -> Draw:
    if np.ndim(num) == 0 and np.ndim(den) == 0:
        count = 1 if size is None else _shape_size(size)
        return Draw("bernoulli_rational", Fraction(int(num), int(den)), count)
    nums, dens = np.broadcast_arrays(np.asarray(num), np.asarray(den))
    probs = [Fraction(int(a), int(b)) for a, b in zip(nums.ravel(), dens.ravel(), strict=True)]
    return Draw("bernoulli_rational", None, len(probs), {"probabilities": probs})


def _bernoulli_exp(x: Any, rng: Any, size: Any) -> Draw:
    return Draw("bernoulli_exp", Fraction(x), _shape_size(size))


def _bernoulli_exp_array(numerators: Any, denominator: Any, rng: Any) -> Draw:
    nums = np.asarray(numerators)
    return Draw(
        "bernoulli_exp_array",
        None,
        nums.size,
        {"exponents": [Fraction(int(v), int(denominator)) for v in nums.ravel()]},
    )


def _compare_table(table: Any, index: Any, oracle: Any, rng: Any) -> Draw:
    idx = np.asarray(index, dtype=np.int64)
    return Draw(
        "compare_table",
        None,
        int(idx.shape[0]),
        {"index": idx, "first_words": np.asarray(table)[idx], "oracle": oracle},
    )


def _counting_sample(self: Any, counts: Any, rng: Any, *, strict: bool = False) -> Draw:
    c = np.asarray(counts, dtype=np.int64)
    return Draw(
        "counting_sampler",
        Fraction(self.ratio),
        int(c.size),
        {"sampler": self, "counts": c.copy(), "strict": strict},
    )


def _cpbm_dyadic(m: int, numerators: Any, rng: Any, bits: int = cpbm.P_BITS) -> Draw:
    a = np.asarray(numerators, dtype=np.int64)
    return Draw(
        "cpbm_binomial", None, int(a.size), {"trials": int(m), "numerators": a.copy(), "bits": bits}
    )


def _cpbm_tables(tab: Any, a: Any, fine: int, rng: Any) -> Draw:
    arr = np.asarray(a, dtype=np.int64)
    return Draw(
        "cpbm_binomial",
        None,
        int(arr.size),
        {"trials": int(tab.m), "numerators": arr.copy(), "bits": int(tab.c) + int(fine)},
    )


def _selection_blocks(name: str) -> Callable[..., Draw]:
    """Selections over blocks of candidates: the parameter is ``gamma``, the size the number of
    draws (groups), the scores kept for the caller."""

    def describe(*args: Any) -> Draw:
        if name == "permute_and_flip":
            owner, scores, sizes, gamma, _ = args
            n = int(np.asarray(owner)[-1]) + 1
        else:
            scores, sizes, gamma, _ = args
            n = 1
        extra = {"scores": np.asarray(scores).copy(), "sizes": np.asarray(sizes).copy()}
        return Draw(name, Fraction(gamma), n, extra)

    return describe


#: (owner, attribute, describe): the sampler functions and methods the spy replaces
TARGETS: list[tuple[Any, str, Callable[..., Draw]]] = [
    (laplace, "discrete_laplace", _laplace),
    (laplace, "laplace_threshold", _laplace_threshold),
    (gaussian, "discrete_gaussian", _gaussian),
    (geometric, "geometric", _geometric),
    (binomial, "binomial", _binomial),
    (binomial, "binomial_half", _binomial_half),
    (bernoulli, "bernoulli_rational", _bernoulli_rational),
    (bernoulli, "bernoulli_exp", _bernoulli_exp),
    (bernoulli, "bernoulli_exp_array", _bernoulli_exp_array),
    (bernoulli, "compare_table", _compare_table),
    (finite_geometric.GeoSample, "sample", _counting_sample),
    (finite_geometric.FastSample, "sample", _counting_sample),
    (cpbm, "binomial_dyadic", _cpbm_dyadic),
    (cpbm, "_tables_batch", _cpbm_tables),
    (exponential, "exponential_blocks", _selection_blocks("exponential")),
    (permute_flip, "permute_and_flip_blocks", _selection_blocks("permute_and_flip")),
]


#: samplers whose output is not the noise itself: how each answers from scripted full noise
#: (called with the sampler's second and third arguments and the script's noise)
ANSWERS: dict[str, Callable[..., Any]] = {"laplace_threshold": _kept_above}


class NoiseSpy:
    """Records (and optionally scripts) every outermost sampler call while active."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script
        self.draws: list[Draw] = []
        self._local = threading.local()

    def of(self, sampler: str) -> list[Draw]:
        return [d for d in self.draws if d.sampler == sampler]

    def _wrap(
        self, original: Callable[..., Any], describe: Callable[..., Draw]
    ) -> Callable[..., Any]:
        spy = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(spy._local, "depth", 0)
            if depth:
                return original(*args, **kwargs)
            spy._local.depth = 1
            try:
                draw = describe(*args, **kwargs)
                scripted = spy.script(draw) if spy.script is not None else None
                if scripted is None:
                    out = original(*args, **kwargs)
                    draw.output = np.array(out, copy=True)
                else:  # the script gives the noise: a thresholded draw keeps what reaches
                    draw.output = np.array(scripted, copy=True)
                    out = scripted
                    answer = ANSWERS.get(original.__name__)
                    if answer is not None:
                        out = answer(*args[1:3], scripted)
                spy.draws.append(draw)
                return out
            finally:
                spy._local.depth = 0

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    @contextmanager
    def active(self) -> Iterator[NoiseSpy]:
        patches: list[tuple[Any, str, Any]] = []
        wrappers: dict[int, tuple[Any, Any]] = {}  # id(wrapper) -> (wrapper, original)
        try:
            for owner, attr, describe in TARGETS:
                original = owner.__dict__[attr]
                wrapper = self._wrap(original, describe)
                wrappers[id(wrapper)] = (wrapper, original)
                if isinstance(owner, type):  # a method: replace it on its class
                    patches.append((owner, attr, original))
                    setattr(owner, attr, wrapper)
                    continue
                # a function: replace every reference a privhist module holds
                for module in _privhist_modules():
                    for key, value in list(vars(module).items()):
                        if value is original:
                            patches.append((module, key, original))
                            setattr(module, key, wrapper)
            yield self
        finally:
            for owner, attr, original in reversed(patches):
                setattr(owner, attr, original)
            # modules imported while the spy was active took the wrappers: give them back
            for module in _privhist_modules():
                for key, value in list(vars(module).items()):
                    pair = wrappers.get(id(value))
                    if pair is not None and pair[0] is value:
                        setattr(module, key, pair[1])


def _privhist_modules() -> list[Any]:
    return [
        module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "privhist" or name.startswith("privhist."))
    ]
