"""Building each release of the :class:`~privhist.session.Session` from its checked parameters:
a releasable (:mod:`privhist.mechanisms.releasable`), the per-key mechanism a dry run shows (if
any) and what a dry run reports. Nothing here reads data."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import privhist.mechanisms.registry as registry
from privhist.core.constraints import Constraint
from privhist.core.errors import InputDataError, MissingInputError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.validation import (
    MAX_EPSILON,
    check_delta,
    check_epsilon,
    check_positive_int,
    float_down,
)
from privhist.mechanisms.base import Mechanism
from privhist.mechanisms.releasable import Releasable
from privhist.session.releases import (
    AutoCapMechanism,
    AutoCapSelector,
    FederatedFrequencyRelease,
    HeavyHittersRelease,
    OneShotHeavyHitters,
    QuantilesRelease,
    RangeCountsRelease,
    WeightedSampleRelease,
)

#: the mechanism of a user-level release given no contribution cap: the user-level plan
#: (:func:`privhist.planning.user_level.choose`), which chooses between vote selection and
#: cumulative-sips from two DP statistics bought in the same spend; with a cap, the key
#: selector that needs the fewest users for a key at that cap (benchmarks/bench_user_level.py)
USER_LEVEL_DEFAULT = "user-level-default"

#: what a dry run reports: the release's parameters; a value may be a function of no arguments,
#: called by a dry run only (what takes time to compute and only a dry run shows)
Details = dict[str, Any]


def mechanism(
    name: str,
    epsilon: float,
    delta: float,
    nb: Neighbouring,
    domain: Any,
    confidence: float,
    options: dict[str, Any],
) -> Mechanism:
    """The registered mechanism ``name`` (``default``: the planner's choice) for these
    parameters."""
    from privhist.planning.plan import build, choose_default

    if name == "default":
        keys_only = bool(options.get("keys_only"))
        try:
            name = choose_default(epsilon, delta, nb, domain=domain, keys_only=keys_only)
        except ValidationError as exc:
            if exc.parameter != "mechanism":
                raise
            # no mechanism applies: building the one that would be chosen says why
            preferred = (
                "dense" if domain is not None else "optimal-selection" if keys_only else "stability"
            )
            build(preferred, epsilon, delta, nb, domain=domain, confidence=confidence, **options)
            raise
    return build(name, epsilon, delta, nb, domain=domain, confidence=confidence, **options)


def histogram(
    fn: str,
    *,
    mechanism_name: str,
    epsilon: float,
    delta: float,
    user_level: bool,
    max_partitions: int | str | None,
    max_per_partition: int | str | None,
    domain: Any,
    confidence: float,
    options: dict[str, Any],
    votes: bool = True,
) -> tuple[Releasable, Mechanism | None, Details]:
    """The release of a histogram (see :meth:`privhist.session.Session.histogram`); ``votes``
    says whether the engine casts vote selection's votes (else the user-level plan leaves vote
    selection out)."""
    known = {"default", "vote-selection", *registry.names(), *registry.weighted_registry()}
    if not isinstance(mechanism_name, str) or mechanism_name not in known:
        raise ValidationError("mechanism", fn, f"one of {', '.join(sorted(known))}", mechanism_name)
    if not user_level:
        for param, value in (
            ("max_partitions", max_partitions),
            ("max_per_partition", max_per_partition),
        ):
            if value is not None:
                raise ValidationError(
                    param, fn, "given together with a user column (user-level data)", value
                )
    name = mechanism_name
    if name == "vote-selection":
        return _votes(
            fn,
            epsilon,
            delta,
            user_level,
            max_partitions,
            max_per_partition,
            domain,
            confidence,
            options,
        )
    if (
        name == "default"
        and user_level
        and domain is None
        and max_per_partition in (None, 1)
        and (max_partitions in (None, "auto") or (delta > 0 and _ranked(max_partitions)))
        and set(options) <= {"keys_only"}
    ):
        # user-level data: the user-level plan (the most accurate release measured)
        _needs_delta(fn, delta)
        return _user_level_plan(fn, epsilon, delta, max_partitions, confidence, options, votes)
    auto = "auto" in (max_partitions, max_per_partition)
    if name in registry.weighted_registry():
        return _weighted(
            fn,
            name,
            epsilon,
            delta,
            user_level,
            max_partitions,
            max_per_partition,
            domain,
            confidence,
            options,
        )
    if auto:
        return _auto_cap(
            fn, name, epsilon, delta, max_partitions, max_per_partition, domain, confidence, options
        )
    assert not isinstance(max_partitions, str) and not isinstance(max_per_partition, str)
    nb = (
        Neighbouring.user(
            1 if max_partitions is None else max_partitions,
            1 if max_per_partition is None else max_per_partition,
        )
        if user_level
        else Neighbouring.add_remove()
    )
    mech = mechanism(name, epsilon, delta, nb, domain, confidence, dict(options))
    return mech, mech, {"mechanism": mech.name}


def _ranked(max_partitions: int | str | None) -> bool:
    """Whether the user-level plan ranks the selectors at this integer cap (larger caps go to
    the per-key planner)."""
    from privhist.planning.user_level import MAX_RANKED_CAP

    return isinstance(max_partitions, int) and 1 <= max_partitions <= MAX_RANKED_CAP


def _needs_delta(fn: str, delta: float) -> None:
    """The user-level default (the key selectors' plan) needs a delta: say so, and what would
    not."""
    if delta <= 0:
        raise ValidationError(
            "delta",
            fn,
            "> 0 for the default mechanism of user-level data (the key selectors' plan); with "
            "delta 0 give a cap (max_partitions) and a pure-DP mechanism: dense or "
            "basic-geometric with a public domain, or pure-sparse",
            delta,
        )


def _only_keys_only(where: str, options: dict[str, Any]) -> bool:
    """``keys_only`` from ``options``, refusing every other option."""
    opts = dict(options)
    keys_only = bool(opts.pop("keys_only", False))
    if opts:
        first = sorted(opts)[0]
        raise ValidationError(first, where, "an option of this mechanism", opts[first])
    return keys_only


def _user_level_plan(
    fn: str,
    epsilon: float,
    delta: float,
    max_partitions: int | str | None,
    confidence: float,
    options: dict[str, Any],
    votes: bool,
) -> tuple[Releasable, Mechanism | None, Details]:
    """The user-level plan (:func:`privhist.planning.user_level.choose`): with no cap (or
    ``"auto"``) vote selection or cumulative-sips, decided inside the spend; with a cap the
    best key selector for it. A dry run shows the choice and the ranking."""
    from privhist.planning.user_level import choose

    keys_only = _only_keys_only(f"{fn} with mechanism default", options)
    plan = choose(
        epsilon,
        delta,
        keys_only=keys_only,
        max_partitions=max_partitions,
        confidence=confidence,
        votes=votes,
    )
    details: Details = {
        "mechanism": plan.name,
        "choice": plan.rule,
        "explanation": plan.explain,
    }
    return plan, None, details


def _votes(
    fn: str,
    epsilon: float,
    delta: float,
    user_level: bool,
    max_partitions: int | str | None,
    max_per_partition: int | str | None,
    domain: Any,
    confidence: float,
    options: dict[str, Any],
) -> tuple[Releasable, Mechanism | None, Details]:
    """Vote selection (:class:`~privhist.mechanisms.user_level.votes.VoteSelection`): one vote
    per user, no cap on the keys a user holds; keys only with ``keys_only``, else keys and
    counts."""
    from privhist.mechanisms.user_level.votes import VoteSelection

    where = f"{fn} with mechanism vote-selection"
    if not user_level:
        raise ValidationError("user", where, "a user column (user-level data)", None)
    if domain is not None:
        raise ValidationError("domain", where, "None", "a domain")
    for param, value in (
        ("max_partitions", max_partitions),
        ("max_per_partition", max_per_partition),
    ):
        if value is not None:
            raise ValidationError(
                param, where, "None (each user casts one vote, whatever it holds)", value
            )
    keys_only = _only_keys_only(where, options)
    votes = VoteSelection(epsilon, delta, counts=not keys_only, confidence=confidence)
    return votes, None, {"mechanism": votes.name, **votes.parameters()}


def _weighted(
    fn: str,
    name: str,
    epsilon: float,
    delta: float,
    user_level: bool,
    max_partitions: int | str | None,
    max_per_partition: int | str | None,
    domain: Any,
    confidence: float,
    options: dict[str, Any],
) -> tuple[Releasable, Mechanism | None, Details]:
    """A weighted user-level selector (WGM, DP-SIPS, cumulative-sips): each user spreads one
    unit of L2 weight over at most ``max_partitions`` keys (default: the selector's); keys only
    with ``keys_only``, else keys and counts from a second Gaussian release."""
    where = f"{fn} with mechanism {name}"
    if not user_level:
        raise ValidationError("user", where, "a user column (user-level data)", None)
    if domain is not None:
        raise ValidationError("domain", where, "None", "a domain")
    if max_per_partition not in (None, 1):
        raise ValidationError(
            "max_per_partition",
            where,
            "1 (the selectors count users, not records)",
            max_per_partition,
        )
    keys_only = _only_keys_only(where, options)
    cls = registry.weighted_registry()[name]
    kwargs: dict[str, Any] = {"counts": not keys_only, "confidence": confidence}
    if max_partitions == "auto":
        auto = AutoCapSelector(cls, epsilon, delta, kwargs)
        return auto, None, {"mechanism": name, "max_partitions": "auto"}
    if max_partitions is not None:
        # the selectors call it max_keys; the message names what the caller gave
        declared = cls.constraints()["max_keys"]
        kwargs["max_keys"] = declared.check(max_partitions, "max_partitions", fn)
    selector = cls(epsilon, delta, **kwargs)
    return selector, None, {"mechanism": name, **selector.parameters()}


def _auto_cap(
    fn: str,
    name: str,
    epsilon: float,
    delta: float,
    max_partitions: int | str | None,
    max_per_partition: int | str | None,
    domain: Any,
    confidence: float,
    options: dict[str, Any],
) -> tuple[Releasable, Mechanism | None, Details]:
    """A per-key mechanism whose caps are DP quantiles, each bought with 5% of epsilon
    (:class:`~privhist.session.releases.AutoCapMechanism`)."""
    from privhist.mechanisms.user_level.caps import (
        CAP_CANDIDATES,
        DEFAULT_CAP_FRACTION,
        RECORD_CAP_CANDIDATES,
    )

    auto_k, auto_c = max_partitions == "auto", max_per_partition == "auto"
    ks = CAP_CANDIDATES if auto_k else (1 if max_partitions is None else int(max_partitions),)
    cs = (
        RECORD_CAP_CANDIDATES
        if auto_c
        else (1 if max_per_partition is None else int(max_per_partition),)
    )
    eps_cap = float(epsilon) * DEFAULT_CAP_FRACTION
    eps_mech = float(epsilon) - eps_cap * (auto_k + auto_c)
    # the parts, as the floats the mechanisms receive, must add up to at most the charge
    while Fraction(eps_cap) * (auto_k + auto_c) + Fraction(eps_mech) > Fraction(epsilon):
        eps_mech = math.nextafter(eps_mech, 0.0)
    built = {
        (k, c): mechanism(
            name,
            eps_mech,
            delta,
            Neighbouring.user(int(k), int(c)),
            domain,
            confidence,
            dict(options),
        )
        for k in ks
        for c in cs
    }
    release = AutoCapMechanism(built, auto_k, auto_c, eps_cap, eps_mech, delta)
    details = {
        "mechanism": next(iter(built.values())).name,
        "max_partitions": max_partitions,
        "max_per_partition": max_per_partition,
    }
    return release, None, details


def heavy_hitters(
    fn: str,
    *,
    epsilon: float,
    delta: float,
    levels: int | None,
    level_epsilon: float | None,
    alphabet: str | None,
    terminator: str | None,
    drop_unknown: bool,
    one_shot: bool,
    secure_sum: str,
    confidence: float,
) -> tuple[Releasable, Mechanism | None, Details]:
    """TrieHH++ (or one sample-and-threshold histogram of whole items)."""
    from privhist.federated.triehh import DEFAULT_ALPHABET, DEFAULT_TERMINATOR, TrieHH
    from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

    for param, text in (("alphabet", alphabet), ("terminator", terminator)):
        if text is not None and not isinstance(text, str):
            raise ValidationError(param, fn, "a string", text)
    if secure_sum not in ("ideal", "secagg", "secagg+"):
        raise ValidationError("secure_sum", fn, "one of ideal, secagg, secagg+", secure_sum)
    alphabet = DEFAULT_ALPHABET if alphabet is None else alphabet
    terminator = DEFAULT_TERMINATOR if terminator is None else terminator
    if one_shot:
        for param, value in (("levels", levels), ("level_epsilon", level_epsilon)):
            if value is not None:
                raise ValidationError(
                    param, fn, "not given with one_shot (one histogram, no trie levels)", value
                )
        if secure_sum != "ideal":
            raise ValidationError("secure_sum", fn, "ideal with one_shot", secure_sum)
        mech = SampleAndThreshold(epsilon, delta)
        one = OneShotHeavyHitters(mech, alphabet, drop_unknown)
        return one, mech, {"one_shot": True}
    trie = TrieHH(
        epsilon,
        delta,
        levels=10 if levels is None else levels,
        alphabet=alphabet,
        terminator=terminator,
        drop_unknown=drop_unknown,
        level_epsilon=level_epsilon,
        confidence=confidence,
    )
    comp = trie.composition
    level = SampleAndThreshold(comp.level.epsilon, comp.level.delta)
    release = HeavyHittersRelease(trie, secure_sum)
    return release, level, {"one_shot": False, "levels": trie.levels, **release.details()}


def quantiles(
    fn: str,
    *,
    q: Any,
    lower: float,
    upper: float,
    epsilon: float,
    delta: float,
    method: str,
    levels: int,
    branching: int,
    confidence: float,
    clamp: bool,
    options: dict[str, Any],
) -> tuple[Releasable, Mechanism | None, Details]:
    """Private quantiles (Bharadwaj & Cormode 2022, Section 4.2)."""
    from privhist.analytics.quantiles import check_levels, quantile_method

    qs = check_levels(q, fn)
    lower, upper = _public_range(lower, upper, fn)
    if method == "binary-search" and branching != 2:
        raise ValidationError("branching", fn, "2 with method binary-search", branching)
    estimator = quantile_method(
        len(qs),
        epsilon,
        delta,
        lo=lower,
        hi=upper,
        method=method,
        levels=levels,
        branching=branching,
        confidence=confidence,
        function=fn,
        **{k: v for k, v in options.items() if v is not None},
    )
    release = QuantilesRelease(estimator, qs, method, clamp)
    return release, None, {"method": method, "levels": levels}


def range_counts(
    fn: str,
    *,
    queries: Any,
    lower: float,
    upper: float,
    epsilon: float,
    delta: float,
    levels: int,
    branching: int,
    confidence: float,
    clamp: bool,
    options: dict[str, Any],
) -> tuple[Releasable, Mechanism | None, Details]:
    """Private range counts from one hierarchical release (Bharadwaj & Cormode 2022, 4.2)."""
    from privhist.analytics.range_query import HierarchicalHistogram

    lower, upper = _public_range(lower, upper, fn)
    hh = HierarchicalHistogram(
        epsilon,
        delta,
        lo=lower,
        hi=upper,
        branching=branching,
        levels=levels,
        confidence=confidence,
        **{k: v for k, v in options.items() if v is not None},
    )
    if isinstance(queries, str) or not isinstance(queries, list | tuple) or not queries:
        raise ValidationError("queries", fn, "a non-empty list of (A, B) ranges", queries)
    checked: list[tuple[float, float]] = []
    for pair in queries:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ValidationError("queries", fn, "(A, B) pairs of numbers", pair)
        a, b = (Constraint.real().check(v, "queries", fn) for v in pair)
        if not lower <= a <= b <= upper:
            raise ValidationError(
                "queries",
                fn,
                f"ranges (A, B) with {lower:g} <= A <= B <= {upper:g} (inside the public range)",
                f"{a:g} {b:g}",
            )
        checked.append((a, b))
    release = RangeCountsRelease(hh, checked, clamp)
    return release, None, {"levels": levels, "queries": len(checked)}


def _public_range(lower: float, upper: float, fn: str) -> tuple[float, float]:
    """``(lower, upper)``, finite with ``lower < upper``: checked here, by the method's names for
    them, before the hierarchy checks them as its own ``lo`` and ``hi``."""
    lo = float(Constraint.real().check(lower, "lower", fn))
    hi = float(Constraint.real().check(upper, "upper", fn))
    if not hi > lo:
        raise ValidationError("upper", fn, f"greater than the lower end, {lo:g}", upper)
    return lo, hi


def weighted_sample(
    fn: str,
    *,
    epsilon: float,
    delta: float,
    weight: str | None,
    tau: float | None,
    k: int | None,
    k_budget: float,
    scheme: str,
    power: float,
    max_frequency: int,
    keys_only: bool,
    aggregate: bool,
    frequency_rule: str,
) -> tuple[Releasable, Mechanism | None, Details]:
    """A private weighted sample (Cohen, Geri, Sarlos & Stemmer, Algorithm 2)."""
    from privhist.mechanisms.sampling.pws.max_separation_release import check_rule
    from privhist.mechanisms.sampling.pws.sanitize import matrix_limit
    from privhist.mechanisms.sampling.pws.schemes import SCHEMES, check_power, check_tau

    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValidationError("scheme", fn, f"one of {', '.join(SCHEMES)}", scheme)
    if (tau is None) == (k is None):
        raise ValidationError("tau", fn, "exactly one of tau and k", (tau, k))
    if tau is not None:
        check_tau(tau, fn)
    power = check_power(power, fn)
    eps = check_epsilon(epsilon, fn, maximum=MAX_EPSILON)
    check_delta(delta, fn, positive=True)
    m = check_positive_int(max_frequency, fn, "max_frequency")
    rule = check_rule(frequency_rule, fn)
    if not keys_only and m > matrix_limit(delta, rule):
        raise ValidationError(
            "max_frequency",
            fn,
            f"<= {matrix_limit(delta, rule)} without keys_only (frequency_rule {rule}, this delta)",
            m,
        )
    if rule == "max-separation" and keys_only:
        raise ValidationError(
            "frequency_rule",
            fn,
            "integer-tokens with keys_only (no frequencies are released)",
            rule,
        )
    eps_total = 0.0
    if k is not None:
        check_positive_int(k, fn, "k")
        if power not in (0.0, 1.0, 2.0):
            raise ValidationError("power", fn, "0, 1 or 2 with k (else give tau)", power)
        if not isinstance(k_budget, float) or not 0 < k_budget < 1:
            raise ValidationError("k_budget", fn, "a fraction in (0, 1)", k_budget)
        eps_total = eps * k_budget
        eps = eps - eps_total
        # rounded so that the two parts never add up to more than the request
        eps_total = min(eps_total, float_down(Fraction(epsilon) - Fraction(eps)))
    release = WeightedSampleRelease(
        epsilon=eps,
        delta=delta,
        scheme=scheme,
        power=power,
        max_frequency=m,
        keys_only=keys_only,
        rule=rule,
        weight=weight,
        aggregate=aggregate,
        tau=tau,
        k=k,
        epsilon_total=eps_total,
    )
    return release, None, {"scheme": scheme}


def federated_frequency(
    fn: str,
    *,
    epsilon: float,
    delta: float,
    protocol: str,
    theta: float,
    bits: int,
    max_items: int,
    rounds: int,
    eta: float,
    frame: str,
    domain: Any,
    domain_from_data: bool,
    top_d: int | None,
    secure_sum: str,
    progress: Any,
    announce: Any = None,
) -> tuple[Releasable, Mechanism | None, Details]:
    """User-level federated frequency estimation, TFFE or MFFE (Section 5)."""
    from privhist.engines.local.federated_data import read_domain
    from privhist.federated.cpbm_accounting import check_theta
    from privhist.federated.dht import check_bits

    eps = check_epsilon(epsilon, fn, "epsilon", maximum=MAX_EPSILON)
    delta = check_delta(delta, fn, "delta", positive=True)
    if protocol not in ("tffe", "mffe"):
        raise ValidationError("protocol", fn, "tffe or mffe", protocol)
    if frame not in ("auto", "orthogonal", "hadamard"):
        raise ValidationError("frame", fn, "auto, orthogonal or hadamard", frame)
    if secure_sum not in ("ideal", "secagg", "secagg+"):
        raise ValidationError("secure_sum", fn, "one of ideal, secagg, secagg+", secure_sum)
    theta = check_theta(theta, fn, "theta")
    bits = check_bits(bits, fn)
    max_items = check_positive_int(max_items, fn, "max_items")
    rounds = check_positive_int(rounds, fn, "rounds")
    if (
        isinstance(eta, bool)
        or not isinstance(eta, int | float)
        or not (math.isfinite(eta) and eta > 0)
    ):
        raise ValidationError("eta", fn, "a finite number > 0", eta)
    if top_d is not None:
        check_positive_int(top_d, fn, "top_d")
    public = domain is not None
    if public and (domain_from_data or top_d is not None):
        raise ValidationError("domain", fn, "given without domain_from_data and top_d", domain)
    if not public and not domain_from_data:
        raise ValidationError(
            "domain",
            fn,
            "a file with the public item domain (or domain_from_data, which is not private)",
            None,
        )
    if top_d is not None and not domain_from_data:
        raise ValidationError("top_d", fn, "used with domain_from_data", top_d)
    items: tuple[Any, ...] | None = None
    if isinstance(domain, str | os.PathLike):
        items = tuple(read_domain(domain, fn))
    elif domain is not None:
        if not isinstance(domain, list | tuple) or not domain:
            raise ValidationError("domain", fn, "a file or a non-empty sequence of keys", domain)
        items = tuple(str(x) for x in domain)
    release = FederatedFrequencyRelease(
        epsilon=eps,
        delta=delta,
        protocol=protocol,
        theta=theta,
        bits=bits,
        max_items=max_items,
        rounds=rounds,
        eta=eta,
        frame=frame,
        domain=items,
        top_d=top_d,
        secure_sum=secure_sum,
        progress=progress,
        announce=announce,
    )
    return release, None, {"protocol": protocol, "public_domain": public}


def aggregate(
    fn: str,
    *,
    by: tuple[str, ...],
    metrics: dict[str, Any],
    epsilon: float,
    delta: float,
    user_level: bool,
    max_partitions: int,
    max_per_partition: int,
    partitions: Any,
    confidence: float,
    noise: str = "auto",
    weights: Any = None,
) -> Releasable:
    """Metrics per group (:class:`~privhist.analytics.aggregate.Aggregation`)."""
    from privhist.analytics.aggregate import Aggregation

    eps = check_epsilon(epsilon, fn, maximum=MAX_EPSILON)
    dl = check_delta(delta, fn, normal=True)
    for name, value in (
        ("max_partitions", max_partitions),
        ("max_per_partition", max_per_partition),
    ):
        check_positive_int(value, fn, name)
        if not user_level and value != 1:
            raise ValidationError(
                name, fn, "1 without a user column (each record is a unit)", value
            )
    public = None if partitions is None else check_partitions(partitions, by, fn)
    return Aggregation(
        metrics,
        by,
        eps,
        dl,
        user_level,
        max_partitions,
        max_per_partition,
        public,
        confidence,
        noise=noise,
        weights=weights,
    )


def check_aggregate_columns(
    kinds: dict[str, tuple[str, str]],
    where: str,
    by: Sequence[str],
    user: str | None,
    metrics: dict[str, Any],
    function: str,
) -> None:
    """The columns an aggregation names, against the source's columns and their kinds
    (:func:`privhist.engines.local.aggregate.column_kinds`), before any record is read: each
    error names the parameter that names the column (``by``, ``user``, ``metrics``).

    Raises:
        MissingInputError: a named column is not in the source (``where`` describes it), or a
            group or user column is not scalar.
        ValidationError: a sum, mean, variance or quantiles metric reads a column whose type
            is not a type of numbers (text, booleans, dates: words, booleans and dates are
            left out of the metric, whose release would be noise alone; numbers written as
            text are to be cast by the caller).
    """
    names = ", ".join(map(repr, kinds))
    named = [("by", list(by), "")]
    if user is not None:
        named.append(("user", [user], ""))
    for name, metric in metrics.items():
        if metric.column is not None:
            named.append(("metrics", [metric.column], f" (the column of metric {name!r})"))
    for param, columns, what in named:
        gone = [c for c in columns if c not in kinds]
        if gone:
            raise MissingInputError(
                param,
                function,
                f"name columns of {where} ({names})",
                f"{', '.join(map(repr, gone))}{what}",
            )
    for param, columns, _ in named[: 2 if user is not None else 1]:
        for c in columns:
            if kinds[c][0] == "nested":
                raise MissingInputError(
                    param, function, "name columns of scalar values", f"{c!r} of type {kinds[c][1]}"
                )
    for name, metric in metrics.items():
        if metric.column is None:
            continue
        kind, type_name = kinds[metric.column]
        if kind in ("other", "nested"):
            raise ValidationError(
                "metrics",
                function,
                f"metrics of numeric columns (a {metric.kind} reads numbers, and "
                f"{metric.column!r} is of type {type_name}; cast numbers written as text to "
                "numbers first)",
                name,
            )


def check_partitions(
    partitions: Any, by: Sequence[str], function: str
) -> tuple[tuple[Any, ...], ...]:
    """Public partitions as tuples of values, one per group column: from a list of keys (values,
    or tuples for several columns), a table of key rows (its columns named as ``by``), or a
    :class:`~privhist.core.metrics.Product`."""
    from privhist.core.metrics import Product

    if isinstance(partitions, Product):
        if tuple(partitions.columns) != tuple(by):
            raise ValidationError(
                "partitions",
                function,
                f"a product over the group columns {list(by)}",
                list(partitions.columns),
            )
        rows = partitions.rows()
    elif hasattr(partitions, "columns") and hasattr(partitions, "to_dict"):
        names = list(partitions.columns)
        if sorted(names) != sorted(by):
            raise ValidationError(
                "partitions", function, f"a table with the columns {list(by)}", names
            )
        import polars as pl

        frame = partitions if isinstance(partitions, pl.DataFrame) else pl.from_pandas(partitions)
        rows = [tuple(r[c] for c in by) for r in frame.to_dicts()]
    elif isinstance(partitions, list | tuple):
        rows = [tuple(p) if isinstance(p, tuple) else (p,) for p in partitions]
        if any(len(r) != len(by) for r in rows):
            raise ValidationError(
                "partitions",
                function,
                f"keys of {len(by)} value(s) (one per group column)",
                partitions,
            )
    else:
        raise ValidationError(
            "partitions",
            function,
            "a list of keys, a table of key rows or metrics.product()",
            type(partitions).__name__,
        )
    if not rows:
        raise ValidationError("partitions", function, "at least one group", partitions)
    if any(v is None for r in rows for v in r):
        raise ValidationError("partitions", function, "keys without nulls", partitions)
    if len(set(rows)) != len(rows):
        raise InputDataError(f"{function}: a public partition is listed more than once")
    return tuple(rows)
