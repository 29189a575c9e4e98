"""The releases built on sample-and-threshold, private weighted sampling and federated frequency
estimation, as steps of the one pipeline of :class:`privhist.session.Session`.

Each function here is the body of a :class:`~privhist.session.Session` method: it checks every
parameter and the output destination, checks the budget, reads the source (a file, or a table the
session's engine reads), and ends in :meth:`Session.charged`, which draws inside the ledger
transaction and publishes after the commit. The ``privhist`` commands of the same names are
argparse plus one of these calls plus printing.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent, PrivacyEvent, composed
from privhist.core.budget import Budget
from privhist.core.errors import InputDataError, UnsupportedError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource, default_source
from privhist.core.release import Release
from privhist.core.validation import MAX_EPSILON, float_down
from privhist.io.integrity import seal_csv, seal_metadata
from privhist.io.writers import encode_release

if TYPE_CHECKING:
    import polars as pl

    from privhist.session import DryRun, Session

#: table formats a numeric column can be read from
TABULAR = ("csv", "tsv", "parquet", "ndjson")


def _is_path(source: Any) -> bool:
    return isinstance(source, str | os.PathLike)


def _source_label(source: Any) -> str:
    return os.fspath(source) if _is_path(source) else f"a {type(source).__name__}"


def _output(
    session: Session,
    output: str | os.PathLike[str] | None,
    output_format: str | None,
    source: Any,
    fn: str,
) -> str | None:
    from privhist.session import check_output

    if output is None:
        return None
    return check_output(
        output, output_format, [source if _is_path(source) else None], session.ledger_path, fn
    )


# -- heavy hitters ---------------------------------------------------------------------------


@dataclass
class HeavyHittersResult:
    """A heavy-hitters release and how its guarantee was composed."""

    release: Release
    #: per-level and composed guarantees (TrieHH++), or the one-shot parameters
    details: dict[str, Any]
    clients: int
    dropped: int
    private: bool


def heavy_hitters(
    session: Session,
    source: Any,
    *,
    epsilon: float,
    delta: float,
    key: str | None = None,
    input_format: str | None = None,
    levels: int | None = None,
    level_epsilon: float | None = None,
    alphabet: str | None = None,
    terminator: str | None = None,
    drop_unknown: bool = False,
    one_shot: bool = False,
    output: str | os.PathLike[str] | None = None,
    output_format: str | None = None,
    seed: int | None = None,
    dry_run: bool = False,
    secure_sum: str = "ideal",
    confidence: float = 0.95,
) -> HeavyHittersResult | DryRun:
    """TrieHH++ (or one sample-and-threshold histogram of whole items) over one item per client.

    See :class:`privhist.federated.triehh.TrieHH` (Bharadwaj & Cormode 2022, Section 4.1).
    Each TrieHH++ item carries ``lower`` / ``upper``: a ``confidence`` interval for its number
    of clients, valid given its release (:mod:`privhist.federated.triehh_intervals`).
    """
    from privhist.engines.base import CountRequest
    from privhist.federated.population import Population
    from privhist.federated.triehh import (
        DEFAULT_ALPHABET,
        DEFAULT_TERMINATOR,
        TrieHH,
        check_alphabet,
        one_shot_heavy_hitters,
    )
    from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

    fn = "heavy-hitters"
    session.check_source(source, fn)
    alphabet = DEFAULT_ALPHABET if alphabet is None else alphabet
    terminator = DEFAULT_TERMINATOR if terminator is None else terminator
    if one_shot:
        for name, value in (("levels", levels), ("level_epsilon", level_epsilon)):
            if value is not None:
                raise ValidationError(
                    name, fn, "not given with one_shot (one histogram, no trie levels)", value
                )
    if input_format != "text" and key is None:
        raise ValidationError("key", fn, "given for a table (or use the text format)", None)
    out_format = _output(session, output, output_format, source, fn)
    hh: TrieHH | None = None
    mech: SampleAndThreshold | None = None
    if one_shot:
        mech = SampleAndThreshold(epsilon, delta)
        cost = mech.guarantee()
        name = f"{fn} --one-shot"
    else:
        hh = TrieHH(
            epsilon,
            delta,
            levels=10 if levels is None else levels,
            alphabet=alphabet,
            terminator=terminator,
            drop_unknown=drop_unknown,
            level_epsilon=level_epsilon,
            confidence=confidence,
        )
        cost = hh.composition.guarantee
        name = f"{fn} (TrieHH++)"
    if dry_run:
        comp = None if hh is None else hh.composition
        level = mech if comp is None else SampleAndThreshold(comp.level.epsilon, comp.level.delta)
        return session._dry_run(level, cost, Neighbouring.add_remove(), {"one_shot": one_shot})
    run_event = None
    if session.charging:  # only the ledger judges and keeps the event
        run_event = mech.event() if hh is None else hh.composition.event()  # type: ignore[union-attr]
    session._check_budget(cost, None, seed, fn, run_event)
    rng = default_source(seed)
    counts = session.engine.count(
        source,
        CountRequest(key=key or "key", format=input_format),
        rng,
        progress=session.progress,
    )
    if len(counts) == 0:
        raise InputDataError(f"the population is empty: {_source_label(source)} has no items")
    info = {k: v for k, v in counts.info.items() if k != "bounds_defaulted"}
    pop = Population(counts.keys, counts.counts.astype(np.int64), info)
    details: dict[str, Any] = {}
    dropped = 0
    if mech is not None:
        kept, dropped = check_alphabet(pop, alphabet, drop_unknown, fn)
        if kept is None:
            raise ValidationError("alphabet", fn, "covering at least one item", alphabet)
        one_pop = kept

        def draw() -> Release:
            return one_shot_heavy_hitters(one_pop, mech, rng)

        details = {"sampling_rate": float(mech.sampling_rate), "threshold": mech.threshold}
    else:
        assert hh is not None
        trie = hh
        found: list[Any] = []

        def draw() -> Release:
            from privhist.federated.secagg.aggregator import secure_sum_option

            result = trie.run(pop, rng, secure_sum=secure_sum_option(secure_sum))
            found.append(result)
            return result.release()

    release = session.charged(
        cost,
        name,
        None,
        draw,
        encode=lambda r: encode_release(r, out_format or "csv", function=fn),
        output=output,
        event=run_event,
    )
    if hh is not None:
        dropped = int(found[0].diagnostics["dropped_for_alphabet"])
        comp = hh.composition
        details = {
            "level": {
                "epsilon": comp.level.epsilon,
                "delta": comp.level.delta,
                "sampling_rate": float(comp.sampling_rate),
                "threshold": comp.threshold,
            },
            "composition": {
                nm: None if b is None else {"epsilon": b.epsilon, "delta": b.delta}
                for nm, b in (
                    ("basic", comp.basic),
                    ("advanced", comp.advanced),
                    ("pld", comp.pld),
                    ("pld_certified", comp.pld_certified),
                )
            },
            "used": comp.method,
        }
    return HeavyHittersResult(release, details, pop.size, dropped, rng.private)


# -- quantiles and range counts ----------------------------------------------------------------


def read_values(
    session: Session,
    source: Any,
    column: str,
    input_format: str | None,
    function: str,
) -> tuple[npt.NDArray[np.float64], dict[str, Any]]:
    """The numeric values of ``column`` (one per row) and exact facts about them.

    Every cell is read as text and parsed on its own as a float (never a type inferred from the
    data); empty and non-numeric cells and NaN are dropped and counted in ``dropped``.
    """
    import polars as pl

    from privhist.engines.local.engine import as_polars
    from privhist.engines.local.progress import status
    from privhist.io import resolve_format, scan
    from privhist.io.readers import select_records

    if _is_path(source):
        fmt = resolve_format(source, input_format, function)
        if fmt not in TABULAR:
            raise ValidationError(
                "input_format", function, f"a table format ({', '.join(TABULAR)})", fmt
            )
        lf = scan(source, format=fmt, key=column, key_type="str", function=function)
    else:
        lf = select_records(
            as_polars(source, function),
            key=column,
            user=None,
            key_type="str",
            function=function,
            source="the table",
        ).lazy()
    query = lf.select(pl.col("key").str.strip_chars().cast(pl.Float64, strict=False).alias("x"))
    label = _source_label(source)
    try:
        with status(f"Reading {label}", enabled=session.progress):
            df = query.collect()
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputDataError(f"cannot read {label}: {first}") from exc
    x = df["x"].to_numpy().astype(np.float64)
    rows = x.shape[0]
    values = x[~np.isnan(x)]
    return values, {"rows": rows, "dropped": int(rows - values.shape[0])}


def quantiles(
    session: Session,
    source: Any,
    *,
    column: str,
    q: Any,
    lo: float,
    hi: float,
    epsilon: float,
    delta: float,
    method: str = "hierarchical",
    levels: int = 8,
    branching: int = 2,
    confidence: float = 0.95,
    clamp: bool = False,
    input_format: str | None = None,
    seed: int | None = None,
    dry_run: bool = False,
    **options: Any,
) -> tuple[Any, dict[str, Any]] | DryRun:
    """Private quantiles (Bharadwaj & Cormode 2022, Section 4.2); returns the answers and exact,
    NOT private facts about the input (rows read, dropped, clamped). ``cohort_size`` and
    ``clients`` (with ``method="binary-search"``) run every round on a fixed-size cohort
    (:mod:`privhist.analytics.quantiles_cohort`; substitution neighbours)."""
    from privhist.analytics.quantiles import answer_quantiles, check_levels, quantile_method

    fn = "quantiles"
    session.check_source(source, fn)
    qs = check_levels(q, fn)
    if method == "binary-search" and branching != 2:
        raise ValidationError("branching", fn, "2 with method binary-search", branching)
    estimator = quantile_method(
        len(qs),
        epsilon,
        delta,
        lo=lo,
        hi=hi,
        method=method,
        levels=levels,
        branching=branching,
        confidence=confidence,
        function=fn,
        **{k: v for k, v in options.items() if v is not None},
    )
    cost = estimator.guarantee()
    # fixed-size cohorts (cohort_size, clients) are analysed for substitution neighbours
    cohort = options.get("cohort_size") is not None
    relation = Neighbouring.replace() if cohort else Neighbouring.add_remove()
    if dry_run:
        return session._dry_run(None, cost, relation, {"method": method})
    run_event = estimator.event() if session.charging else None  # only the ledger uses it
    session._check_budget(cost, None, seed, fn, run_event)
    rng = default_source(seed)
    values, facts = read_values(session, source, column, input_format, fn)
    result = session.charged(
        cost,
        f"{fn} ({method})",
        None,
        lambda: answer_quantiles(estimator, values, qs, rng, clamp=clamp),
        event=run_event,
    )
    facts["clamped"] = result.diagnostics.get("clamped", 0)
    return result, facts


def range_counts(
    session: Session,
    source: Any,
    *,
    column: str,
    queries: list[tuple[float, float]],
    lo: float,
    hi: float,
    epsilon: float,
    delta: float,
    levels: int = 8,
    branching: int = 2,
    confidence: float = 0.95,
    clamp: bool = False,
    input_format: str | None = None,
    seed: int | None = None,
    dry_run: bool = False,
    **options: Any,
) -> tuple[Any, list[Any], dict[str, Any]] | DryRun:
    """Private range counts from one hierarchical release (Bharadwaj & Cormode 2022, Section
    4.2); returns the release, the answers in query order, and exact NOT private input facts."""
    from privhist.analytics.range_query import HierarchicalHistogram

    fn = "range"
    session.check_source(source, fn)
    hh = HierarchicalHistogram(
        epsilon,
        delta,
        lo=lo,
        hi=hi,
        branching=branching,
        levels=levels,
        confidence=confidence,
        **{k: v for k, v in options.items() if v is not None},
    )
    for a, b in queries:
        for v in (a, b):
            hh.hierarchy.snap(v, fn)
        if a > b:
            raise ValidationError("query", fn, "A <= B", f"{a:g} {b:g}")
    cost = hh.guarantee()
    if dry_run:
        return session._dry_run(None, cost, Neighbouring.add_remove(), {"levels": levels})
    run_event = hh.event() if session.charging else None  # only the ledger uses it
    session._check_budget(cost, None, seed, fn, run_event)
    rng = default_source(seed)
    values, facts = read_values(session, source, column, input_format, fn)
    release = session.charged(
        cost,
        f"{fn} (hierarchical)",
        None,
        lambda: hh.release(values, rng, clamp=clamp),
        event=run_event,
    )
    facts["clamped"] = release.diagnostics.get("clamped", 0)
    return release, [release.range(a, b) for a, b in queries], facts


# -- private weighted sample ---------------------------------------------------------------------


@dataclass
class WeightedSample:
    """A sanitised weighted sample: its rows, metadata and exact NOT private facts."""

    table: pl.DataFrame
    metadata: dict[str, Any]
    sample_size: int
    clamped: int
    released: int = field(default=0)
    #: what the release did (:func:`pws_sample_event`)
    sample_event: PrivacyEvent | None = field(default=None)

    def event(self) -> PrivacyEvent:
        """The sample as a privacy event (element-level neighbours)."""
        if self.sample_event is None:
            raise ValidationError("sample_event", "WeightedSample.event", "an event", None)
        return self.sample_event

    def guarantee(self) -> Budget:
        """The accountant's guarantee of :meth:`event`."""
        return guarantee_of(self.event())


def pws_sample_event(epsilon: float, delta: float, epsilon_total: float = 0.0) -> PrivacyEvent:
    """A private weighted sample as a privacy event: the sanitiser is ``(epsilon, delta)``-DP
    (the pws sanitisers, Algorithms 3 to 5 of Cohen et al.); with a sample size ``k``, the
    private total drawn before it is ``epsilon_total``-DP (discrete Laplace), composed with it.

    >>> guarantee_of(pws_sample_event(0.75, 1e-6, 0.25))
    Budget(epsilon=1.0, delta=1e-06)
    """
    sample = ApproxDPEvent(epsilon, delta)
    if not epsilon_total:
        return sample
    return composed([ApproxDPEvent(epsilon_total, 0.0), sample])


def _read_weighted(
    source: Any, key: str, weight: str | None, fn: str
) -> tuple[npt.NDArray[Any], npt.NDArray[Any] | None]:
    import polars as pl

    from privhist.engines.local.engine import as_polars

    if _is_path(source):
        p = Path(source)
        if not p.is_file():
            raise InputDataError(f"{fn}: no such file: {os.fspath(source)}")
        suffix = p.suffix.lower()
        try:
            if suffix in (".parquet", ".pq"):
                df = pl.read_parquet(p)
            elif suffix in (".ndjson", ".jsonl"):
                df = pl.read_ndjson(p)
            else:
                df = pl.read_csv(p, separator="\t" if suffix == ".tsv" else ",", infer_schema=False)
        except Exception as exc:  # polars raises many kinds
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise InputDataError(f"{fn}: cannot read {os.fspath(source)}: {first}") from None
    else:
        frame = as_polars(source, fn)
        df = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    label = _source_label(source)
    for col in (key, weight):
        if col is not None and col not in df.columns:
            raise InputDataError(f"{fn}: column {col!r} not in {label} ({', '.join(df.columns)})")
    keys = df[key].cast(pl.String)
    if keys.null_count():
        raise InputDataError(f"{fn}: {keys.null_count()} rows with a null key")
    if weight is None:
        return keys.to_numpy(), None
    try:
        w = df[weight].cast(pl.Float64, strict=True)
    except Exception:
        raise ValidationError(
            "weight", fn, "a column of positive integer frequencies", weight
        ) from None
    return keys.to_numpy(), w.to_numpy()


def _private_tau(
    f: Any, k: int, power: float, m: int, epsilon: float, rng: RandomSource
) -> tuple[float, dict[str, Any]]:
    """``tau = k / max(D Z, 1)`` from a private total (see :func:`weighted_sample`)."""
    from privhist.noise import discrete_laplace, rational_at_least

    if power == 0:
        total, sens = int(f.shape[0]), 1
    elif power == 1:
        total, sens = int(f.sum(dtype=object)), 1
    else:  # power 2, frequencies clamped to m
        total, sens = int((f.astype(object) ** 2).sum()), 2 * m - 1
    scale = rational_at_least(Fraction(1) / Fraction(epsilon))
    z = total // sens + int(discrete_laplace(scale, rng, 1)[0])
    estimate = max(sens * z, 1)
    return k / estimate, {"k": k, "private_total": estimate, "epsilon_total": epsilon}


def weighted_sample(
    session: Session,
    source: Any,
    *,
    key: str,
    epsilon: float,
    delta: float,
    weight: str | None = None,
    tau: float | None = None,
    k: int | None = None,
    k_budget: float = 0.1,
    scheme: str = "ppswor",
    power: float = 1.0,
    max_frequency: int = 2000,
    keys_only: bool = False,
    aggregate: bool = False,
    output: str | os.PathLike[str] | None = None,
    seed: int | None = None,
    dry_run: bool = False,
    frequency_rule: str = "integer-tokens",
) -> WeightedSample | DryRun:
    """A private weighted sample (Cohen, Geri, Sarlos & Stemmer, Algorithm 2), sanitised by the
    certified keys-and-frequencies sanitiser (or the keys sanitiser with ``keys_only``).

    With ``k`` instead of ``tau`` a fraction ``k_budget`` of epsilon buys a private total
    ``S = sum_x f(min(w_x, M))`` (the paper's Section 3.1), and ``tau = k / max(D Z, 1)`` with
    ``Z = floor(S / D) + DiscreteLaplace(1 / eps_1)``, ``D`` the largest change of one element;
    basic composition gives ``(epsilon, delta)`` overall.

    ``frequency_rule="max-separation"`` sanitises frequencies with Algorithm 5 (maximum separation,
    Theorem 5.1) instead of Algorithm 4 (``"integer-tokens"``; the paper's numbers ``"algorithm5"``
    and ``"algorithm4"`` are accepted too), from an integer matrix certified DP before the draw
    (:mod:`privhist.mechanisms.sampling.pws.max_separation_release`); each row then also carries
    ``sanitized_value``, the right end of its token's interval. At most 1000 for
    ``max_frequency`` (200 below ``delta = 2**-42``, where its densities are computed in high
    precision; Algorithm 4 takes up to 5000, 2000 below ``2**-42``). Any ``delta > 0``.
    """
    import json as _json

    import polars as pl

    from privhist.core.validation import check_delta, check_epsilon, check_positive_int
    from privhist.mechanisms.sampling.pws.max_separation_release import check_rule
    from privhist.mechanisms.sampling.pws.sanitize import (
        matrix_limit,
        sanitize_frequencies,
        sanitize_keys,
    )
    from privhist.mechanisms.sampling.pws.schemes import (
        aggregated,
        check_power,
        check_tau,
        threshold_sample,
    )

    fn = "sample"
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
    out_format: str | None = None
    if output is not None:
        out_path = Path(output)
        if out_path.suffix.lower() not in (".csv", ".json"):
            raise ValidationError("output", fn, "a .csv or .json file", os.fspath(output))
        if not out_path.parent.is_dir():
            raise ValidationError("output", fn, "a file in an existing directory", str(output))
        out_format = _output(session, output, out_path.suffix.lower()[1:], source, fn)
    event = pws_sample_event(eps, delta, eps_total)
    budget = guarantee_of(event)
    session.check_source(source, fn)
    if dry_run:
        return session._dry_run(None, budget, Neighbouring.add_remove(), {"scheme": scheme})
    session._check_budget(budget, None, seed, fn, event)
    keys, weights = _read_weighted(source, key, weight, fn)
    if weights is None:
        uniq, cnt = np.unique(keys, return_counts=True)
        kk, f = uniq, cnt.astype(np.int64)
    else:
        kk, f = aggregated(keys, weights, fn, aggregate=aggregate)
    # a public bound: frequencies above it are clamped *before* sampling; w -> min(w, M)
    # keeps neighbouring data neighbouring, so the guarantee is unchanged
    clamped = int((f > m).sum())
    f = np.minimum(f, m)
    rng = default_source(seed)

    def draw() -> WeightedSample:
        extra: dict[str, Any] = {}
        t = tau
        if k is not None:
            t, extra = _private_tau(f, k, power, m, eps_total, rng)
        assert t is not None
        sample = threshold_sample(kk, f, scheme, t, rng, power=power)  # type: ignore[arg-type]
        if keys_only:
            priv = sanitize_keys(sample, eps, delta, rng)
        else:
            priv = sanitize_frequencies(sample, eps, delta, rng, max_frequency=m, rule=rule)
        columns: dict[str, Any] = {
            "key": priv.keys.astype(str).tolist(),
            "token": priv.tokens,
            "estimate": priv.estimates,
            "bias": priv.bias,
            "variance": priv.variance,
        }
        if rule == "max-separation":
            columns["sanitized_value"] = priv.values
        table = pl.DataFrame(columns)
        guarantee = f"({budget.epsilon}, {budget.delta})-DP, element-level neighbours"
        if k is not None:
            guarantee += f" (epsilon {eps_total:.6g} on the private total, {eps:.6g} on the sample)"
        meta: dict[str, Any] = {
            "mechanism": "pws sample",
            "scheme": scheme,
            "tau": t,
            "power": power,
            "max_frequency": m,
            "guarantee": guarantee,
            "randomness": rng.to_dict(),
            **extra,
            **priv.metadata,
        }
        if not rng.private:
            meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return WeightedSample(table, meta, len(sample), clamped, len(priv), event)

    def encode(ws: WeightedSample) -> bytes:
        if out_format == "json":
            rows = [
                {k2: (None if v != v else v) for k2, v in r.items()} for r in ws.table.to_dicts()
            ]
            doc = {"metadata": seal_metadata(ws.metadata, rows), "rows": rows}
            return (_json.dumps(doc, indent=2) + "\n").encode("utf-8")
        text = ws.table.write_csv()  # sealed with a trailer line (privhist.io.integrity)
        return seal_csv(text if isinstance(text, str) else "").encode("utf-8")

    return session.charged(
        budget, f"pws sample ({scheme})", None, draw, encode=encode, output=output, event=event
    )


# -- federated frequency estimation ------------------------------------------------------------


def federated_frequency(
    session: Session,
    source: Any,
    *,
    epsilon: float,
    delta: float,
    user: str | bool,
    key: str = "key",
    input_format: str | None = None,
    protocol: str = "tffe",
    theta: float = 0.2,
    bits: int = 8,
    max_items: int = 1,
    rounds: int = 1,
    eta: float = 1.0,
    domain: Any = None,
    domain_from_data: bool = False,
    top_d: int | None = None,
    frame: Any = None,
    seed: int | None = None,
    progress: Any = None,
    secure_sum: str = "ideal",
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """User-level federated frequency estimation, TFFE or MFFE (the federated-frequency paper,
    Section 5): returns the result, the users read, the frame, and its report fields.

    ``frame`` builds the encoding frame from ``(dimension, rng)``; ``progress`` is a callable
    ``(label, total) -> advance`` (or None).
    """
    from privhist.core.validation import check_delta, check_epsilon, check_positive_int
    from privhist.federated import ffe
    from privhist.federated.cpbm_accounting import check_theta
    from privhist.federated.dht import check_bits
    from privhist.federated.kashin import uniform01
    from privhist.federated.secagg.aggregator import aggregator_factory
    from privhist.io.federated_data import read_domain, read_user_counts, user_counts_from_table

    fn = "federated-frequency"
    eps = check_epsilon(epsilon, fn, "epsilon", maximum=MAX_EPSILON)
    delta = check_delta(delta, fn, "delta", positive=True)
    theta = check_theta(theta, fn, "theta")
    bits = check_bits(bits, fn)
    max_items = check_positive_int(max_items, fn, "max_items")
    rounds = check_positive_int(rounds, fn, "rounds")
    if not (math.isfinite(eta) and eta > 0):
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
    session.check_source(source, fn)
    if session.charging:
        # its guarantee is for replacing one user's whole vector, a unit the ledger does not keep
        raise UnsupportedError(
            "federated-frequency cannot be charged to a ledger dataset: its guarantee is for "
            "replace-one-user neighbours, which the ledger's record and user units do not cover"
        )
    if isinstance(domain, str | os.PathLike):
        domain = read_domain(domain, fn)
    if _is_path(source):
        users = read_user_counts(
            source, user=user, key=key, format=input_format, top_d=top_d, domain=domain
        )
    else:
        from privhist.engines.local.engine import as_polars

        users = user_counts_from_table(
            as_polars(source, fn), user=user, key=key, top_d=top_d, domain=domain
        )
    n, d = users.n_users, users.dimension
    rng = default_source(seed)
    frm = frame(d, rng)

    def tick(label: str, total: int) -> Any:
        return (lambda k: None) if progress is None else progress(label, total)

    if protocol == "tffe":
        cal = ffe.calibrate_tffe(eps, delta, n, frm.D, bits=bits, theta=theta)

        def draw() -> Any:
            return ffe.tffe(
                users,
                frm,
                rng,
                m=cal.m,
                m_quantile=cal.m_quantile,
                max_items=max_items,
                theta=theta,
                bits=bits,
                aggregator=aggregator_factory(secure_sum),
                progress=tick("TFFE", 2 * n),
            )

    else:
        sizes = ffe.round_sizes(n, rounds)
        cal = ffe.calibrate_mffe(eps, delta, min(sizes), frm.D, theta=theta)
        order = np.argsort(uniform01(rng, n), kind="stable")  # i.i.d. rounds (Corollary 1)

        def draw() -> Any:
            return ffe.mffe(
                users.subset(order),
                frm,
                rng,
                m=cal.m,
                m_quantile=cal.m_quantile,
                rounds=rounds,
                theta=theta,
                eta=eta,
                aggregator=aggregator_factory(secure_sum),
                progress=tick("MFFE", n),
            )

    result = draw()
    return result, users, frm, {"public_domain": public, "calibration": cal}
