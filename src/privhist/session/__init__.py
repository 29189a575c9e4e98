"""The release pipeline as one Python object: :class:`Session`.

A session holds a budget ledger and the dataset it charges, and an
:class:`~privhist.engines.base.Engine` that counts. Every kind of release is one method, and every
method runs the same pipeline, the one the ``privhist`` command runs too (each releasing command is
argparse plus one call here):

1. **validate** every parameter, build the mechanism, check the output destination and the
   remaining budget: all before any data is read;
2. **scan** the source (a file path, or a pandas, Polars or pyarrow table), **drop nulls**
   (counted), **bound** each user's contribution with cryptographic priorities and **count** per
   key (the engine);
3. **draw** the release and encode the output in memory, inside one ledger transaction that
   **charges** the dataset: the budget is re-checked and taken atomically with the draw, and if
   anything raises, nothing is spent;
4. **publish**: only once the spend is committed is the release written (atomically) or returned.

So an exception leaves no spend and no file, and no byte of a release reaches the disk before it is
paid for (a kill between the draw and the commit leaves neither). A failure while writing after the
commit keeps the spend: the budget is charged for every release that could have escaped.

Seeded randomness (``seed=``) makes a release reproducible and marks it NOT private; it is never
charged to a ledger. A dry run (``dry_run=True``) builds the mechanism and answers what the release
would cost, what would remain and how likely a key of each true count is to appear, without reading
data or touching the budget (like dp_accounting's compose with ``do_compose=False``).

Example:
    >>> import polars as pl
    >>> from privhist import Budget, Session
    >>> visits = pl.DataFrame({"page": ["home"] * 60 + ["about"] * 3})
    >>> with Session.in_memory(Budget(2.0, 1e-6)) as s:
    ...     plan = s.histogram(visits, key="page", epsilon=1, delta=1e-8, dry_run=True)
    ...     release = s.histogram(visits, key="page", epsilon=1, delta=1e-8)
    ...     left = s.remaining()
    >>> plan.cost, plan.remaining.epsilon, plan.allowed
    (Budget(epsilon=1.0, delta=1e-08), 2.0, True)
    >>> release.keys.tolist(), left.epsilon
    (['home'], 1.0)
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import numpy.typing as npt

import privhist.mechanisms.registry as registry
from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent, composed
from privhist.accounting.composition import PrivacyEvent as Event
from privhist.accounting.ledger import BudgetAmount, Ledger, LedgerStatus, PrivacyUnit
from privhist.core.budget import Budget
from privhist.core.data import Counts
from privhist.core.errors import UnsupportedError, ValidationError
from privhist.core.faults import checkpoint
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import default_source
from privhist.core.release import Release
from privhist.core.validation import MAX_EPSILON, check_delta, check_epsilon
from privhist.engines.base import CountRequest, Engine
from privhist.io.writers import encode_release, write_bytes_atomic
from privhist.mechanisms.base import Mechanism
from privhist.session._support import (
    _build,
    _engine,
    _is_fimi,
    _with_counts_info,
    check_output,
    naming_the_method,
    read_domain,
)

T = TypeVar("T")

#: the mechanism of a user-level release given no contribution cap: DP-SIPS with its default cap
#: released the most keys (keys only) and, with counts, more keys at a smaller error than every
#: per-key mechanism and PipelineDP on retail and msweb (benchmarks/bench_user_level.py)
USER_LEVEL_DEFAULT = "cumulative-sips"

__all__ = ["DryRun", "Session", "check_output", "read_domain"]


@dataclass(frozen=True)
class DryRun:
    """What a release would cost and give, computed without data or budget.

    Attributes:
        mechanism: the mechanism the release would run (for releases built from several
            mechanisms, the one each key or node goes through), constructed from parameters
            only; None where no single reporting curve describes the release.
        cost: the budget it would charge.
        neighbouring: the relation its guarantee is for.
        remaining: the dataset's remaining budget now (None without a ledger).
        allowed: whether the ledger would accept the charge (True without a ledger).
    """

    mechanism: Mechanism | None
    cost: Budget
    neighbouring: Neighbouring
    remaining: BudgetAmount | None
    allowed: bool
    details: dict[str, Any] = field(default_factory=dict)

    def reporting_curve(self, max_count: int = 40) -> list[float]:
        """Pr[a key is released] for a key of true count 0..max_count (empty when the release
        has no single reporting curve)."""
        from privhist.planning.plan import plan

        if self.mechanism is None:
            return []
        return list(plan(self.mechanism, max_count)["reporting_probability"])

    def to_dict(self, max_count: int = 40) -> dict[str, Any]:
        from privhist.planning.plan import plan

        return {
            "dry_run": True,
            "cost": {"epsilon": self.cost.epsilon, "delta": self.cost.delta},
            "remaining": None
            if self.remaining is None
            else {"epsilon": self.remaining.epsilon, "delta": self.remaining.delta},
            "allowed": self.allowed,
            **self.details,
            "plan": None if self.mechanism is None else plan(self.mechanism, max_count),
        }


@dataclass(frozen=True)
class _HistogramCall:
    """The checked arguments of one :meth:`Session.histogram`, for the paths it dispatches to."""

    source: Any
    path: str | os.PathLike[str] | None
    mechanism: str
    epsilon: float
    delta: float
    key: str | None
    user: str | bool | None
    max_partitions: int | str | None
    max_per_partition: int | str | None
    domain: Any
    confidence: float
    input_format: str | None
    key_type: str | None
    options: dict[str, Any]
    output: str | os.PathLike[str] | None
    output_format: str | None
    escape_formulas: bool
    seed: int | None
    dry_run: bool

    def request(self, max_partitions: int | None, max_per_partition: int | None) -> CountRequest:
        """What the engine counts, with these bounds."""
        return CountRequest(
            key=self.key or "key",
            user=self.user,
            format=self.input_format,
            key_type=self.key_type,
            max_partitions=max_partitions,
            max_per_partition=max_per_partition,
        )


class Session:
    """A ledger, the dataset it charges, and an engine: the one release path.

    Args:
        ledger: a :class:`~privhist.accounting.ledger.Ledger`, the path of one (it must exist:
            create datasets with ``privhist budget init`` or :meth:`Ledger.init_dataset`), or
            None for no ledger (releases are then not charged anywhere; ``dataset`` must be None).
            :meth:`in_memory` makes a session with a private ledger of its own.
        dataset: the dataset id every release of this session is charged to. With a ledger and
            no dataset, releases are not charged.
        engine: where counting happens: an :class:`~privhist.engines.base.Engine`, or
            ``"local"`` (the default, :class:`~privhist.engines.local.LocalEngine`) or
            ``"spark"`` (:class:`~privhist.engines.spark.SparkEngine` on the active Spark
            session, or a new ``local[*]`` one).
        progress: allow progress displays on stderr (shown only when stderr is a terminal).

    Raises:
        LedgerError: the ledger file does not exist or is not a privhist ledger.
        UnknownDatasetError: ``dataset`` is not in the ledger.
    """

    def __init__(
        self,
        ledger: Ledger | str | os.PathLike[str] | None = None,
        dataset: str | None = None,
        *,
        engine: Engine | str | None = None,
        progress: bool = False,
    ) -> None:
        fn = "Session"
        if dataset is not None and (not isinstance(dataset, str) or not dataset):
            raise ValidationError("dataset", fn, "a non-empty string or None", dataset)
        if ledger is None and dataset is not None:
            raise ValidationError("ledger", fn, "a ledger to charge dataset to", None)
        if ledger is not None and not isinstance(ledger, Ledger):
            ledger = Ledger(ledger, create=False)
        self.ledger: Ledger | None = ledger
        self.dataset = dataset
        self.engine: Engine = _engine(engine, fn)
        self.progress = bool(progress)
        self._tempdir: str | None = None
        if self.ledger is not None and dataset is not None:
            self.ledger.show(dataset)  # fails now for an unknown dataset

    @classmethod
    def in_memory(
        cls,
        total: Budget,
        *,
        unit: PrivacyUnit | str = PrivacyUnit.RECORD,
        dataset: str = "data",
        engine: Engine | str | None = None,
        progress: bool = False,
    ) -> Session:
        """A session with a ledger of its own holding one dataset with budget ``total``.

        The ledger lives in a private temporary directory removed by :meth:`close` (or at the end
        of a ``with`` block): use it for notebooks and pipelines that do not need the budget to
        outlive the process.
        """
        tmp = tempfile.mkdtemp(prefix="privhist-ledger-")
        try:
            ledger = Ledger(Path(tmp) / "ledger.sqlite")
            ledger.init_dataset(dataset, total, unit=unit)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        session = cls(ledger, dataset, engine=engine, progress=progress)
        session._tempdir = tmp
        return session

    def close(self) -> None:
        """Remove an in-memory session's ledger (a no-op for a ledger file of the user's)."""
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None
            self.ledger = None
            self.dataset = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "no ledger" if self.ledger is None else str(self.ledger.path)
        return f"Session({where}, dataset={self.dataset!r}, engine={self.engine.name!r})"

    # -- budget ------------------------------------------------------------------------------

    def status(self) -> LedgerStatus | None:
        """The charged dataset's total, spent and remaining budget (None when not charging)."""
        if self.ledger is None or self.dataset is None:
            return None
        return self.ledger.show(self.dataset)

    def remaining(self) -> BudgetAmount | None:
        """The charged dataset's remaining budget (None when not charging)."""
        st = self.status()
        return None if st is None else st.remaining

    @property
    def charging(self) -> bool:
        return self.ledger is not None and self.dataset is not None

    def _check_budget(
        self,
        cost: Budget,
        neighbouring: Neighbouring | None,
        seed: int | None,
        function: str,
        event: Event | None = None,
    ) -> None:
        """Before any data is read: seeded output is never charged, and the budget must allow
        the release (re-checked atomically when it is spent). ``event`` is the one the spend
        records: the dataset's filter judges it (a Renyi-regime dataset admits a release by its
        Renyi curves, which ``cost`` alone does not carry)."""
        if not self.charging:
            return
        if seed is not None:
            raise ValidationError(
                "seed",
                function,
                "None when charging a dataset (seeded output is not private)",
                seed,
            )
        st = self.status()
        assert st is not None and self.dataset is not None
        st.check(cost, neighbouring, event)

    def _dry_run(
        self,
        mechanism: Mechanism | None,
        cost: Budget,
        neighbouring: Neighbouring,
        details: dict[str, Any] | None = None,
        event: Event | None = None,
    ) -> DryRun:
        st = self.status()
        allowed = True
        if st is not None:
            allowed = st.allows(cost, event) and st.admits(neighbouring)
        return DryRun(
            mechanism=mechanism,
            cost=cost,
            neighbouring=neighbouring,
            remaining=None if st is None else st.remaining,
            allowed=allowed,
            details=dict(details or {}),
        )

    @contextlib.contextmanager
    def _charge(
        self, cost: Budget, mechanism: str, nb: Neighbouring | None, event: Event | None = None
    ) -> Iterator[None]:
        """The body (the draw) as one ledger spend of ``event`` (default: ``cost``)."""
        if not self.charging:
            yield
            return
        assert self.ledger is not None and self.dataset is not None
        with self.ledger.spend(self.dataset, cost, mechanism, neighbouring=nb, event=event):
            yield

    def charged(
        self,
        cost: Budget,
        mechanism: str,
        neighbouring: Neighbouring | None,
        draw: Callable[[], T],
        *,
        encode: Callable[[T], bytes] | None = None,
        output: str | os.PathLike[str] | None = None,
        event: Event | None = None,
        publish: Callable[[T], Callable[[], object] | None] | None = None,
    ) -> T:
        """Run ``draw`` as one spend of ``cost``, then publish.

        The draw and the in-memory encoding of its output (``encode``) run inside the ledger
        transaction; the file ``output`` is written atomically only after the spend is committed.
        An engine that writes its own output (Spark's Parquet datasets) gives ``publish``
        instead: called inside the transaction with the result, it prepares in memory and
        returns the function that stages and publishes ``output`` after the commit (None:
        ``encode`` as usual).
        This is the one place where the pipeline draws, charges and publishes; every release
        method ends here.
        """
        data: bytes | None = None
        write: Callable[[], object] | None = None
        checkpoint("read")
        with self._charge(cost, mechanism, neighbouring, event):
            result = draw()
            checkpoint("drawn")
            if output is not None and publish is not None:
                write = publish(result)
            if output is not None and write is None and encode is not None:
                data = encode(result)
            if write is not None or data is not None:
                checkpoint("encoded")
        checkpoint("committed")
        if write is not None:
            write()
        elif output is not None and data is not None:
            write_bytes_atomic(output, data)
        return result

    # -- releases ----------------------------------------------------------------------------

    @naming_the_method("histogram")
    def histogram(
        self,
        source: Any,
        *,
        epsilon: float,
        delta: float = 0.0,
        key: str | None = None,
        user: str | bool | None = None,
        mechanism: str = "default",
        max_partitions: int | str | None = None,
        max_per_partition: int | str | None = None,
        domain: Sequence[Any] | npt.ArrayLike | str | os.PathLike[str] | None = None,
        confidence: float = 0.95,
        input_format: str | None = None,
        key_type: str | None = None,
        options: dict[str, Any] | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: str | None = None,
        escape_formulas: bool = True,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """Release a private histogram of the keys of ``source``.

        Args:
            source: a file path (CSV/TSV, Parquet, NDJSON, text, FIMI) or a table the engine
                reads (local engine: pandas, Polars or pyarrow).
            epsilon, delta: the guarantee of the release (its cost).
            key: the key column (not needed for text and FIMI files).
            user: the user column for user-level privacy (``True`` for text/FIMI files: each
                line is a user; FIMI files are always user-level).
            mechanism: a registered mechanism name, or ``"default"`` (the planner's choice).
            max_partitions, max_per_partition: the contribution bounds ``k`` and ``c`` for
                user-level data (default: no cap given, DP-SIPS with its own default cap; a
                per-key mechanism then takes 1 each). ``max_partitions="auto"`` spends 5% of the
                budget on a DP quantile of users' key counts, in the same spend (zCDP for the
                weighted selectors, :func:`privhist.mechanisms.user_level.caps.auto_selector`;
                discrete Laplace and basic composition for per-key mechanisms);
                ``max_per_partition="auto"`` does the same for ``c`` with a DP quantile of
                users' most records on one key (per-key mechanisms; another 5%).
            domain: a public domain of keys (a sequence, or a file with one key per line).
            confidence: the confidence of intervals.
            input_format: the file format when the name does not tell.
            key_type: ``"str"`` or ``"int"``; never inferred from the data.
            options: mechanism options (e.g. ``{"keys_only": True}``).
            output: write the release here (CSV, JSON or Parquet), atomically and only after the
                spend is committed; refused if it is the input file or the ledger.
            output_format: ``csv``, ``json`` or ``parquet`` (default: from ``output``'s name).
            escape_formulas: escape CSV keys a spreadsheet would run as formulas (see
                :mod:`privhist.io.writers`).
            seed: reproducible, NOT private randomness (never charged).
            dry_run: return a :class:`DryRun` instead, reading no data and spending nothing.

        Returns:
            The :class:`~privhist.core.release.Release` (or a :class:`DryRun`).
        """
        fn = "histogram"
        check_epsilon(epsilon, fn, maximum=MAX_EPSILON)
        check_delta(delta, fn, normal=True)
        path = source if isinstance(source, str | os.PathLike) else None
        fimi = path is not None and (
            input_format == "fimi" or (input_format is None and _is_fimi(path))
        )
        self.check_source(source, fn)
        if key is None and not (input_format == "text" or fimi):
            raise ValidationError("key", fn, "a column name", None)
        if fimi and user is None:
            user = True  # FIMI baskets are users by the format's definition
        if user is None or user is False:
            user = None
            for name, value in (
                ("max_partitions", max_partitions),
                ("max_per_partition", max_per_partition),
            ):
                if value is not None:
                    raise ValidationError(
                        name, fn, "given together with a user column (user-level data)", value
                    )
        if not isinstance(escape_formulas, bool):
            raise ValidationError("escape_formulas", fn, "True or False", escape_formulas)
        dom = read_domain(domain, fn)
        if (
            mechanism == "default"
            and user is not None
            and max_partitions is None
            and max_per_partition is None
            and dom is None
            and getattr(self.engine, "weighted", False)
        ):
            # user-level data with no cap given: the most accurate release measured
            # (benchmarks/bench_user_level.py), cumulative-evidence DP-SIPS, default cap
            mechanism = USER_LEVEL_DEFAULT
        if max_partitions == "auto" and mechanism == "default":
            mechanism = USER_LEVEL_DEFAULT
        call = _HistogramCall(
            source=source,
            path=path,
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            key=key,
            user=user,
            max_partitions=max_partitions,
            max_per_partition=max_per_partition,
            domain=dom,
            confidence=confidence,
            input_format=input_format,
            key_type=key_type,
            options=dict(options or {}),
            output=output,
            output_format=output_format,
            escape_formulas=escape_formulas,
            seed=seed,
            dry_run=dry_run,
        )
        auto_cap = "auto" in (max_partitions, max_per_partition)
        if auto_cap and mechanism not in registry.weighted_registry():
            return self._auto_cap_histogram(call)
        if mechanism in registry.weighted_registry():
            return self._weighted_histogram(call)
        # "auto" went to a weighted selector or to _auto_cap_histogram above
        assert not isinstance(max_partitions, str) and not isinstance(max_per_partition, str)
        nb = (
            Neighbouring.user(
                1 if max_partitions is None else max_partitions,
                1 if max_per_partition is None else max_per_partition,
            )
            if user is not None
            else Neighbouring.add_remove()
        )
        mech = _build(mechanism, epsilon, delta, nb, dom, confidence, dict(options or {}))
        cost = mech.guarantee()
        out_format = self._check_output_for(mech, output, output_format, [path], fn)
        # the event the ledger judges and keeps (built only for a charged dataset)
        event = mech.event() if self.charging else None
        if dry_run:
            return self._dry_run(mech, cost, nb, event=event)
        self._check_budget(cost, nb, seed, fn, event)
        rng = default_source(seed)
        bounds = (
            (nb.max_partitions_contributed, nb.max_contributions_per_partition)
            if user is not None
            else (None, None)
        )
        prepare = getattr(self.engine, "prepare_release", None)
        if prepare is not None:
            # the engine counts now and draws inside the transaction (e.g. on Spark executors)
            draw = prepare(source, call.request(*bounds), mech, rng, progress=self.progress)
            return self._publish(call, cost, mech.name, nb, draw, out_format, event=event)
        counts = self.engine.count(source, call.request(*bounds), rng, progress=self.progress)
        return self._publish(
            call,
            cost,
            mech.name,
            nb,
            lambda: _with_counts_info(mech.release(counts, rng), counts, self.engine.name),
            out_format,
            event=event,
        )

    def _publish(
        self,
        call: _HistogramCall,
        cost: Budget,
        name: str,
        neighbouring: Neighbouring,
        draw: Callable[[], Release],
        out_format: str | None,
        event: Event | None = None,
    ) -> Release:
        """:meth:`charged` for a histogram: encode to ``out_format`` and write ``output`` (or
        let the draw or the engine write it: ``publisher``, e.g. Spark's Parquet datasets)."""
        publisher = getattr(draw, "publisher", None) or getattr(self.engine, "publisher", None)
        try:
            publish: Callable[[Release], Callable[[], object] | None] | None = (
                publisher(call.output, out_format)
                if publisher is not None and call.output is not None
                else None
            )
            return self.charged(
                cost,
                name,
                neighbouring,
                draw,
                encode=lambda r: encode_release(
                    r,
                    out_format or "csv",
                    escape_formulas=call.escape_formulas,
                    function="histogram",
                ),
                output=call.output,
                event=event,
                publish=publish,
            )
        finally:
            close = getattr(draw, "close", None)
            if close is not None:
                close()

    def _auto_cap_histogram(self, call: _HistogramCall) -> Release | DryRun:
        """A per-key mechanism whose caps are DP quantiles: ``k`` (``max_partitions="auto"``)
        of users' distinct keys (:func:`~privhist.mechanisms.user_level.caps.dp_degree_cap`)
        and ``c`` (``max_per_partition="auto"``) of users' most records on one key
        (:func:`~privhist.mechanisms.user_level.caps.dp_record_cap`), each bought with 5% of
        epsilon (discrete Laplace); the mechanism runs at the rest, and basic composition gives
        ``(epsilon, delta)`` for the whole, charged as one spend.

        The mechanism is built for every candidate cap before any data is read, so no
        failure after the caps are drawn can depend on (and reveal) them.
        """
        from privhist.mechanisms.user_level.caps import (
            CAP_CANDIDATES,
            DEFAULT_CAP_FRACTION,
            DEFAULT_QUANTILE,
            RECORD_CAP_CANDIDATES,
            dp_degree_cap,
            dp_record_cap,
        )

        fn = "histogram"
        auto_k, auto_c = call.max_partitions == "auto", call.max_per_partition == "auto"
        if call.user is None:
            name = "max_partitions" if auto_k else "max_per_partition"
            raise ValidationError(name, fn, "an integer unless there is a user column", "auto")
        ks = (
            CAP_CANDIDATES
            if auto_k
            else (1 if call.max_partitions is None else call.max_partitions,)
        )
        cs = (
            RECORD_CAP_CANDIDATES
            if auto_c
            else (1 if call.max_per_partition is None else call.max_per_partition,)
        )
        eps_cap = float(call.epsilon) * DEFAULT_CAP_FRACTION
        eps_mech = float(call.epsilon) - eps_cap * (auto_k + auto_c)
        # the parts, as the floats the mechanisms receive, must add up to at most the charge
        while Fraction(eps_cap) * (auto_k + auto_c) + Fraction(eps_mech) > Fraction(call.epsilon):
            eps_mech = math.nextafter(eps_mech, 0.0)
        built = {
            (k, c): _build(
                call.mechanism,
                eps_mech,
                call.delta,
                Neighbouring.user(int(k), int(c)),
                call.domain,
                call.confidence,
                dict(call.options),
            )
            for k in ks
            for c in cs
        }
        name = next(iter(built.values())).name
        widest = Neighbouring.user(int(max(ks)), int(max(cs)))
        # the spend: the DP caps (pure) and, whichever cap they choose, a release no worse than
        # the candidate with the largest delta -- composed by the accountant (basic composition)
        event = composed(
            [
                ApproxDPEvent(eps_cap, 0.0, count=auto_k + auto_c),
                ApproxDPEvent(
                    max(m.guarantee().epsilon for m in built.values()),
                    max(m.guarantee().delta for m in built.values()),
                ),
            ]
        )
        cost = guarantee_of(event)
        out_format = None
        for m in built.values():
            out_format = self._check_output_for(m, call.output, call.output_format, [call.path], fn)
        if call.dry_run:
            details = {"mechanism": name, "max_partitions": call.max_partitions}
            details["max_per_partition"] = call.max_per_partition
            return self._dry_run(None, cost, widest, details, event=event)
        self._check_budget(cost, widest, call.seed, fn, event)
        rng = default_source(call.seed)
        weighted_source = getattr(self.engine, "weighted_source", None)
        if weighted_source is None or not getattr(self.engine, "weighted", False):
            raise UnsupportedError(f"the {self.engine.name} engine cannot choose a cap ('auto')")
        src = weighted_source(call.source, call.request(None, None), rng)
        degrees = src.degree_histogram(CAP_CANDIDATES) if auto_k else None
        if auto_c and not hasattr(src, "records_histogram"):
            raise UnsupportedError(
                f"the {self.engine.name} engine cannot choose a records-per-key cap "
                "(max_per_partition='auto'); give max_per_partition"
            )
        records = src.records_histogram(RECORD_CAP_CANDIDATES) if auto_c else None

        def draw() -> Release:
            cap: dict[str, Any] = {}
            k, c = ks[0], cs[0]
            if degrees is not None:
                choice = dp_degree_cap(degrees, quantile=DEFAULT_QUANTILE, epsilon=eps_cap, rng=rng)
                k = choice.cap
                cap["max_partitions"] = k
                cap["max_partitions_chosen_by"] = "dp quantile of users' distinct keys"
            if records is not None:
                choice = dp_record_cap(records, quantile=DEFAULT_QUANTILE, epsilon=eps_cap, rng=rng)
                c = choice.cap
                cap["max_per_partition"] = c
                cap["max_per_partition_chosen_by"] = "dp quantile of users' most records on a key"
            mech = built[(k, c)]
            bounded = call.request(int(k), int(c))
            counts = self.engine.count(call.source, bounded, rng, progress=self.progress)
            release = _with_counts_info(mech.release(counts, rng), counts, self.engine.name)
            parts = " + ".join([f"{eps_cap:.6g}"] * (auto_k + auto_c) + [f"{eps_mech:.6g}"])
            cap.update(
                {
                    "noise": "discrete_laplace",
                    "quantile": DEFAULT_QUANTILE,
                    "epsilon": eps_cap * (auto_k + auto_c),
                    "composition": f"basic: ({parts}, {call.delta:g})",
                    "total": {"epsilon": cost.epsilon, "delta": cost.delta},
                }
            )
            release.metadata["cap"] = cap
            return release

        return self._publish(
            call, cost, f"{name} (auto cap)", widest, draw, out_format, event=event
        )

    def _weighted_histogram(self, call: _HistogramCall) -> Release | DryRun:
        """A weighted user-level selector (WGM, DP-SIPS; :mod:`privhist.mechanisms.user_level`):
        each user spreads one unit of L2 weight over at most ``max_partitions`` keys (default
        :data:`~privhist.mechanisms.user_level.selectors.DEFAULT_MAX_KEYS`); keys only with
        ``keys_only``, else keys and counts from a second Gaussian release."""
        fn = "histogram"
        if call.user is None:
            raise ValidationError(
                "user",
                f"{fn} with mechanism {call.mechanism}",
                "a user column (user-level data)",
                None,
            )
        if call.domain is not None:
            raise ValidationError(
                "domain", f"{fn} with mechanism {call.mechanism}", "None", "a domain"
            )
        if call.max_per_partition not in (None, 1):
            raise ValidationError(
                "max_per_partition",
                f"{fn} with mechanism {call.mechanism}",
                "1 (the selectors count users, not records)",
                call.max_per_partition,
            )
        keys_only = bool(call.options.pop("keys_only", False))
        if call.options:
            name = sorted(call.options)[0]
            raise ValidationError(
                name,
                f"{fn} with mechanism {call.mechanism}",
                "an option of this mechanism",
                call.options[name],
            )
        cls = registry.weighted_registry()[call.mechanism]
        kwargs: dict[str, Any] = {"counts": not keys_only, "confidence": call.confidence}
        auto = call.max_partitions == "auto"
        if call.max_partitions is not None and not auto:
            # the selectors call it max_keys; the message names what the caller gave
            declared = cls.constraints()["max_keys"]
            kwargs["max_keys"] = declared.check(call.max_partitions, "max_partitions", fn)
        # with "auto" the cap comes from the data, but parameters are checked (and the cost,
        # the whole (call.epsilon, call.delta), is known) before anything is read
        selector = cls(call.epsilon, call.delta, **kwargs)
        # the relation recorded: call.user-level; with "auto" the cap is chosen privately, so the
        # largest candidate bounds what the ledger records
        from privhist.mechanisms.user_level.caps import CAP_CANDIDATES, auto_selector

        nb = Neighbouring.user(max(CAP_CANDIDATES) if auto else selector.max_keys, 1)
        cost = selector.guarantee()
        out_format = None
        if call.output is not None:
            out_format = check_output(
                call.output, call.output_format, [call.path], self.ledger_path, fn
            )
        # the ledger judges and keeps the release's event (with "auto", one bounding every cap)
        event = None
        if self.charging:
            event = selector.bound_event() if auto else selector.event()
        if call.dry_run:
            details = (
                {"mechanism": call.mechanism, "max_partitions": "auto"}
                if auto
                else {
                    "mechanism": call.mechanism,
                    **selector.parameters(),
                }
            )
            return self._dry_run(None, cost, nb, details, event=event)
        self._check_budget(cost, nb, call.seed, fn, event)
        rng = default_source(call.seed)
        request = call.request(None, None)
        weighted_source = getattr(self.engine, "weighted_source", None)
        if weighted_source is None:
            raise UnsupportedError(
                f"the {self.engine.name} engine has no weighted source for {call.mechanism}"
            )
        src = weighted_source(call.source, request, rng)

        def draw() -> Release:
            if not auto:
                plain: Release = selector.release_weighted(src, rng)
                return plain
            # the cap's noise is drawn inside the transaction too: both parts are one spend
            chosen, choice = auto_selector(cls, call.epsilon, call.delta, src, rng=rng, **kwargs)
            release: Release = chosen.release_weighted(src, rng)
            release.metadata["cap"] = {
                "max_partitions": choice.cap,
                "chosen_by": "dp quantile of users' distinct keys",
                "quantile": choice.quantile,
            }
            return release

        return self._publish(call, cost, call.mechanism, nb, draw, out_format, event=event)

    @naming_the_method("heavy-hitters")
    def heavy_hitters(self, source: Any, **kwargs: Any) -> Any:
        """TrieHH++ heavy hitters (or ``one_shot=True``: one sample-and-threshold histogram of
        whole items) over one item per client; see :func:`privhist.session.analyses.heavy_hitters`
        for the parameters. Returns a :class:`~privhist.session.analyses.HeavyHittersResult`."""
        from privhist.session.analyses import heavy_hitters

        return heavy_hitters(self, source, **kwargs)

    @naming_the_method("quantiles")
    def quantiles(self, source: Any, **kwargs: Any) -> Any:
        """Private quantiles of a numeric column; see
        :func:`privhist.session.analyses.quantiles`."""
        from privhist.session.analyses import quantiles

        return quantiles(self, source, **kwargs)

    @naming_the_method("range")
    def range_counts(self, source: Any, **kwargs: Any) -> Any:
        """Private range counts of a numeric column; see
        :func:`privhist.session.analyses.range_counts`."""
        from privhist.session.analyses import range_counts

        return range_counts(self, source, **kwargs)

    @naming_the_method("sample")
    def weighted_sample(self, source: Any, **kwargs: Any) -> Any:
        """A private weighted sample; see :func:`privhist.session.analyses.weighted_sample`."""
        from privhist.session.analyses import weighted_sample

        return weighted_sample(self, source, **kwargs)

    @naming_the_method("federated-frequency")
    def federated_frequency(self, source: Any, **kwargs: Any) -> Any:
        """User-level federated frequency estimation (TFFE/MFFE); see
        :func:`privhist.session.analyses.federated_frequency`."""
        from privhist.session.analyses import federated_frequency

        return federated_frequency(self, source, **kwargs)

    def count(
        self,
        source: Any,
        request: CountRequest,
        *,
        seed: int | None = None,
    ) -> Counts:
        """The engine's bounded counts of ``source`` (exact, NOT private: nothing is released).

        For building releases by hand; the counts themselves must never be published.
        """
        return self.engine.count(source, request, default_source(seed), progress=self.progress)

    # -- helpers -----------------------------------------------------------------------------

    def check_source(self, source: Any, function: str) -> None:
        """A typed error unless the session's engine reads ``source`` (no data is read)."""
        if not self.engine.accepts(source):
            raise ValidationError(
                "source",
                function,
                f"a file path or a table the {self.engine.name} engine reads",
                type(source).__name__,
            )

    def _check_output_for(
        self,
        mech: Mechanism,
        output: str | os.PathLike[str] | None,
        output_format: str | None,
        inputs: Sequence[str | os.PathLike[str] | None],
        fn: str,
    ) -> str | None:
        formats = getattr(mech, "output_formats", None)  # e.g. compact: a polynomial, not rows
        if output is None:
            if formats is not None:
                raise ValidationError(
                    "output",
                    f"{fn} with mechanism {mech.name}",
                    f"a {' or '.join(formats)} file (CSV rows cannot hold this release)",
                    None,
                )
            return None
        fmt = check_output(output, output_format, inputs, self.ledger_path, fn)
        if formats is not None and fmt not in formats:
            raise ValidationError(
                "format", f"{fn} with mechanism {mech.name}", " or ".join(formats), fmt
            )
        return fmt

    @property
    def ledger_path(self) -> Path | None:
        return None if self.ledger is None else self.ledger.path
