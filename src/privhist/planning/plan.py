"""Planning: the "what will I get" report of every registered mechanism, and the default choice.

``plan`` builds the mechanism from (epsilon, delta), the neighbouring relation and options only —
no data — and reports its parameters and its reporting probability by true count.

The default mechanism for a request is the best-ranked applicable registered mechanism, ranked by
:func:`rank_candidates`:

1. with a public domain, ``dense`` comes first: it loses no key and its noise is the smallest
   (the whole budget goes to the counts);
2. otherwise, among sparse mechanisms that release what was asked (keys only, or keys with counts),
   the smallest ``count_at_half`` wins — the true count at which a key is released with probability
   at least 1/2, i.e. how many keys the release keeps — with ties broken by the noise standard
   deviation of released counts.

For keys with counts this picks ``stability`` (all of epsilon serves both threshold and noise, so it
keeps keys from a lower count *and* has less noise than ``optimal-selection`` with a budget split);
for ``keys_only`` it picks ``optimal-selection``, whose reporting probabilities are optimal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import privhist.mechanisms.registry as registry
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.validation import check_delta, check_epsilon, check_positive_int
from privhist.mechanisms.base import Mechanism

#: the largest true count a plan reports (one probability per count is computed and printed); also
#: the largest population a plan's error report covers (one entry per possible count)
MAX_PLAN_COUNT = 1_000_000


def build(
    name: str,
    epsilon: float,
    delta: float,
    neighbouring: Neighbouring | None = None,
    *,
    domain: Any = None,
    confidence: float = 0.95,
    **options: Any,
) -> Mechanism:
    """Construct the registered mechanism ``name`` from parameters only."""
    cls = registry.get(name)
    known = {o.name for o in cls.options}
    unknown = sorted(k for k, v in options.items() if k not in known and v is not None)
    if unknown:
        raise ValidationError(
            unknown[0].replace("_", "-"),
            name,
            f"an option of {name} ({', '.join(sorted(known)) or 'none'})",
            options[unknown[0]],
        )
    kwargs = {k: v for k, v in options.items() if k in known and v is not None}
    if cls.needs_domain or (domain is not None and accepts_domain(cls)):
        kwargs["domain"] = domain  # required, or optional (pure-sparse: a domain, not B bits)
    elif domain is not None:
        raise ValidationError("domain", name, "absent: this mechanism takes no domain", "a file")
    return cls(epsilon, delta, neighbouring, confidence=confidence, **kwargs)


def accepts_domain(cls: type[Mechanism]) -> bool:
    import inspect

    return "domain" in inspect.signature(cls.__init__).parameters


def count_at(probabilities: np.ndarray[Any, Any], level: float) -> int | None:
    """Smallest true count whose reporting probability is at least ``level``."""
    hit = np.nonzero(probabilities >= level)[0]
    return int(hit[0]) if hit.size else None


def plan(mechanism: Mechanism, max_count: int) -> dict[str, Any]:
    """The plan of a constructed mechanism as a JSON-friendly dict."""
    n = check_positive_int(max_count, "plan", "max_count", minimum=0)
    if n > MAX_PLAN_COUNT:
        raise ValidationError(
            "max_count", "plan", f"<= {MAX_PLAN_COUNT} (the largest accepted)", max_count
        )
    population = getattr(mechanism, "population", None)
    if population is not None and population > MAX_PLAN_COUNT:
        raise ValidationError(
            "population", "plan", f"<= {MAX_PLAN_COUNT} (the largest accepted)", population
        )
    rp = mechanism.reporting_probability(n)
    g = mechanism.guarantee()
    std = mechanism.noise_std()
    effective = effective_epsilon(mechanism)
    return (
        {
            "mechanism": mechanism.name,
            "epsilon": g.epsilon,
            "delta": g.delta,
            "neighbouring": mechanism.neighbouring.to_dict()
            | {"description": mechanism.neighbouring.describe()},
            "guarantee": f"{g} under {mechanism.neighbouring.describe()} neighbours",
            "parameters": mechanism.parameters(),
            "noise_std": None if math.isnan(std) else std,
            "count_at_half": count_at(rp, 0.5),
            "count_always_released": count_at(rp, 1.0),
            "reporting_probability": [float(p) for p in rp],
        }
        | ({} if effective is None else {"effective_epsilon": effective})
        | mechanism.plan_details(n)
    )


def effective_epsilon(mechanism: Mechanism) -> float | None:
    """The epsilon a mechanism's integer construction actually spends, when it is below the
    requested one (the finite-computer histograms round the per-record ratio down to
    ``1 + 2**-K``, ``stability-geometric`` to ``1 + s 2**-K``: at epsilon 1 it runs at
    ``ln(43/16) = 0.989``); None otherwise."""
    value = mechanism.parameters().get("epsilon_effective")
    if value is None or value >= mechanism.epsilon * (1 - 1e-9):
        return None
    return float(value)


@dataclass(frozen=True)
class Candidate:
    name: str
    mechanism: Mechanism
    count_at_half: int
    noise_std: float


def rank_candidates(
    epsilon: float,
    delta: float,
    neighbouring: Neighbouring | None = None,
    *,
    domain: Any = None,
    keys_only: bool = False,
    horizon: int = 100_000,
) -> list[Candidate]:
    """Applicable registered mechanisms, best first (see the module docstring)."""
    out: list[Candidate] = []
    for name, cls in registry.registry().items():
        if not getattr(cls, "default_candidate", True):
            continue
        if cls.needs_domain and domain is None:
            continue
        if cls.requires_delta and delta <= 0:
            continue
        opts: dict[str, Any] = {}
        if keys_only:
            if not any(o.name == "keys_only" for o in cls.options):
                continue
            opts["keys_only"] = True
        try:
            given = domain if (cls.needs_domain or accepts_domain(cls)) else None
            m = build(name, epsilon, delta, neighbouring, domain=given, **opts)
        except ValidationError:
            continue
        rp = m.reporting_probability(horizon)
        half = count_at(rp, 0.5)
        std = m.noise_std()
        out.append(
            Candidate(
                name,
                m,
                horizon + 1 if half is None else half,
                0.0 if math.isnan(std) else std,
            )
        )
    out.sort(key=lambda c: (c.mechanism.sparse, c.count_at_half, c.noise_std, c.name))
    return out


def choose_default(
    epsilon: float,
    delta: float,
    neighbouring: Neighbouring | None = None,
    *,
    domain: Any = None,
    keys_only: bool = False,
) -> str:
    """Name of the default mechanism for the request."""
    epsilon = check_epsilon(epsilon, "histogram")
    delta = check_delta(delta, "histogram")
    ranked = rank_candidates(epsilon, delta, neighbouring, domain=domain, keys_only=keys_only)
    if not ranked:
        if delta <= 0 and domain is None:
            raise ValidationError(
                "delta",
                "histogram",
                "> 0 for a sparse histogram (or give a public --domain for pure DP)",
                delta,
            )
        raise ValidationError("mechanism", "histogram", "an applicable mechanism", "none found")
    return ranked[0].name
