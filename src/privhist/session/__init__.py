"""The release pipeline as one Python object: :class:`Session`.

A session holds a budget ledger and the dataset it charges, and an
:class:`~privhist.engines.base.Engine` that reads the data. Every kind of release is one typed
method -- :meth:`Session.histogram`, :meth:`~Session.heavy_hitters`, :meth:`~Session.quantiles`,
:meth:`~Session.range_counts`, :meth:`~Session.weighted_sample`,
:meth:`~Session.federated_frequency` -- that checks its arguments, builds a releasable
(:mod:`privhist.mechanisms.releasable`) from parameters only, and runs the one release path
(:meth:`Session.release`), the one the ``privhist`` command runs too:

1. **validate** every parameter, the source, the output destination and that the engine answers
   every request of the release, and check the remaining budget: all before any data is read;
2. **dry run** (``dry_run=True``): answer what the release would cost, what would remain and how
   likely a key of each true count is to appear, and stop (like dp_accounting's compose with
   ``do_compose=False``);
3. **read**: the engine answers the release's requests (scan, drop nulls -- counted --, bound
   each user's contribution with cryptographic priorities, aggregate);
4. **charge and draw**: the release is drawn and encoded in memory inside one ledger transaction
   that charges the dataset (the budget is re-checked and taken atomically with the draw; if
   anything raises, nothing is spent);
5. **publish**: only once the spend is committed is the release written (atomically) or
   returned.

So an exception leaves no spend and no file, and no byte of a release reaches the disk before it is
paid for (a kill between the draw and the commit leaves neither). A failure while writing after the
commit keeps the spend: the budget is charged for every release that could have escaped.

Every method returns a :class:`~privhist.io.release.Release` (``to_pandas()``, ``to_polars()``,
``to_arrow()``, ``write()``, ``metadata``) or, with ``dry_run=True``, a
:class:`~privhist.session.dryrun.DryRun`. Seeded randomness (``seed=``) makes a release
reproducible and marks it NOT private; it is never charged to a ledger.

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

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import numpy.typing as npt

from privhist.accounting.ledger import BudgetAmount, Ledger, LedgerStatus, PrivacyUnit
from privhist.core.budget import Budget
from privhist.core.data import Counts
from privhist.core.errors import MissingInputError, ValidationError
from privhist.core.faults import checkpoint
from privhist.core.metrics import Metric, Product
from privhist.core.random import default_source
from privhist.core.requests import (
    Closeable,
    Fields,
    KeyCounts,
    KeyedDraw,
    Reading,
    Request,
    UserVotes,
    check_fields,
)
from privhist.core.validation import MAX_EPSILON, check_delta, check_epsilon
from privhist.engines.base import Engine
from privhist.engines.registry import resolve as resolve_engine
from privhist.io.files import resolve_write_format, uri_scheme, write_bytes_atomic
from privhist.io.release import Release
from privhist.mechanisms.base import Mechanism
from privhist.mechanisms.releasable import Answers, Releasable
from privhist.session import _checks as checks
from privhist.session import build
from privhist.session._support import check_output, naming_the_method, read_domain
from privhist.session.dryrun import DryRun

__all__ = ["DryRun", "Release", "Session", "check_output", "read_domain"]

#: where per-key noise is drawn: on the driver (this process), or where the data lives from keyed
#: streams (Spark executors; the local engine draws the same keyed streams, so both engines
#: give the same release for a seed in either mode)
NOISE_PLACES = ("driver", "executors")

#: a progress display for long federated runs: ``(label, total) -> advance(k)``
ProgressFactory = Callable[[str, int], Callable[[int], object]]


class Session:
    """A ledger, the dataset it charges, and an engine: the one release path.

    Args:
        ledger: a :class:`~privhist.accounting.ledger.Ledger`, the path of one (it must exist:
            create datasets with ``privhist budget init`` or ``Ledger(path).init_dataset``), or
            None for no ledger (releases are then not charged anywhere; ``dataset`` must be None).
            :meth:`in_memory` makes a session with a private ledger of its own.
        dataset: the dataset id every release of this session is charged to. With a ledger and
            no dataset, releases are not charged.
        engine: where the data is read: an :class:`~privhist.engines.base.Engine`, or a name of
            :data:`privhist.engines.registry.NAMES` (``"local"``, the default, or ``"spark"``).
        noise_on: where per-key mechanisms draw their noise: ``"driver"`` or ``"executors"``
            (keyed streams where the data lives); None: the engine's own place (Spark: the
            executors; local: the driver). Both engines give the same release for a seed in
            the same mode.
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
        noise_on: Literal["driver", "executors"] | None = None,
        progress: bool = False,
    ) -> None:
        fn = "Session"
        if dataset is not None and (not isinstance(dataset, str) or not dataset):
            raise ValidationError("dataset", fn, "a non-empty string or None", dataset)
        if ledger is None and dataset is not None:
            raise ValidationError("ledger", fn, "a ledger to charge dataset to", None)
        if ledger is not None and not isinstance(ledger, Ledger | str | os.PathLike):
            raise ValidationError("ledger", fn, "a Ledger, a path or None", type(ledger).__name__)
        if noise_on is not None and noise_on not in NOISE_PLACES:
            raise ValidationError("noise_on", fn, "'driver', 'executors' or None", noise_on)
        checks.flag(progress, "progress", fn)
        if ledger is not None and not isinstance(ledger, Ledger):
            ledger = Ledger(ledger, create=False)
        self.ledger: Ledger | None = ledger
        self.dataset = dataset
        self.engine: Engine = resolve_engine(engine, fn)
        self.noise_on: str = noise_on or ("executors" if self.engine.name == "spark" else "driver")
        self.progress = bool(progress)
        self._tempdir: str | None = None
        self._closed = False
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
        noise_on: Literal["driver", "executors"] | None = None,
        progress: bool = False,
    ) -> Session:
        """A session with a ledger of its own holding one dataset with budget ``total``.

        The ledger lives in a private temporary directory removed by :meth:`close` (or at the end
        of a ``with`` block): use it for notebooks and pipelines that do not need the budget to
        outlive the process. A closed session refuses every call.
        """
        if not isinstance(total, Budget):
            raise ValidationError(
                "total", "Session.in_memory", "a Budget(epsilon, delta)", type(total).__name__
            )
        tmp = tempfile.mkdtemp(prefix="privhist-ledger-")
        try:
            ledger = Ledger(Path(tmp) / "ledger.sqlite")
            ledger.init_dataset(dataset, total, unit=unit)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        session = cls(ledger, dataset, engine=engine, noise_on=noise_on, progress=progress)
        session._tempdir = tmp
        return session

    def close(self) -> None:
        """Close the session: every later call is refused; an in-memory session's ledger is
        removed (a ledger file of the user's is kept)."""
        self._closed = True
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "no ledger" if self.ledger is None else str(self.ledger.path)
        state = ", closed" if self._closed else ""
        return f"Session({where}, dataset={self.dataset!r}, engine={self.engine.name!r}{state})"

    def _open(self, function: str) -> None:
        if self._closed:
            raise ValidationError(
                "session", f"Session.{function}", "an open session (this one was closed)", "closed"
            )

    # -- budget ------------------------------------------------------------------------------

    def status(self) -> LedgerStatus | None:
        """The charged dataset's total, spent and remaining budget (None when not charging)."""
        self._open("status")
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

    @property
    def ledger_path(self) -> Path | None:
        return None if self.ledger is None else self.ledger.path

    # -- the release path --------------------------------------------------------------------

    def release(
        self,
        releasable: Releasable,
        source: Any,
        fields: Fields,
        *,
        function: str,
        output: str | os.PathLike[str] | None = None,
        output_format: str | None = None,
        escape_formulas: bool = True,
        seed: int | None = None,
        dry_run: bool = False,
        details: Mapping[str, Any] | None = None,
        mechanism: Mechanism | None = None,
        check: Callable[[bool], None] | None = None,
        parameters: Mapping[str, str] | None = None,
    ) -> Release | DryRun:
        """The one release path (see the module notes): ``releasable`` on the data of
        ``source`` found at ``fields``. Each public method is a typed wrapper of this one.

        Args:
            releasable: what to release, built from parameters only.
            source: a file path or a table the session's engine reads.
            fields: where in the records the release looks (columns, how files are read).
            function: the method's name for messages (``histogram``).
            output, output_format, escape_formulas: write the release there after the spend
                commits (see :meth:`histogram`).
            seed: reproducible, NOT private randomness (never charged).
            dry_run: return a :class:`DryRun` instead, reading no data and spending nothing.
            details: parameters a dry run reports (a value that is a function of no
                arguments is called, by a dry run only).
            mechanism: the per-key mechanism whose reporting curve a dry run shows.
            check: a check of the source against the release, from its schema, run once the
                parameters are checked and before the budget is (given whether this is a dry
                run, which opens no file); it raises to refuse the release.
            parameters: the method's names of the engine's parameters, for its messages (an
                aggregation's groups are the ``key`` of its requests: ``{"key": "by"}``).
        """
        fn = function
        self._open(fn)
        self.check_source(source, fn)
        checks.flag(dry_run, "dry_run", fn)
        checks.flag(escape_formulas, "escape_formulas", fn)
        seed = checks.optional_int(seed, "seed", fn, minimum=0)
        out_format = self._check_output(releasable, output, output_format, source, fn)
        requests = releasable.requests(fields)
        for request in requests:
            if not self.engine.supports(request):
                raise ValidationError(
                    "engine",
                    fn,
                    f"an engine that computes {request.describe()} (this release needs it)",
                    self.engine.name,
                )
        if check is not None:
            check(dry_run)
        cost = releasable.guarantee()
        nb = releasable.neighbouring
        # the event the ledger judges and keeps (built only for a charged dataset)
        event = releasable.event() if self.charging else None
        st = self.status()
        if dry_run:
            allowed = True
            if st is not None:
                allowed = st.allows(cost, event) and st.admits(nb)
            return DryRun(
                release=releasable.name,
                cost=cost,
                neighbouring=nb,
                remaining=None if st is None else st.remaining,
                allowed=allowed,
                mechanism=mechanism,
                details={k: v() if callable(v) else v for k, v in (details or {}).items()},
            )
        if st is not None:
            if seed is not None:
                raise ValidationError(
                    "seed", fn, "None when charging a dataset (seeded output is not private)", seed
                )
            st.check(cost, nb, event)
        publish = None
        if output is not None and out_format is not None:
            # before the data is read: the engine refuses a destination it cannot write
            publish = self.engine.publisher(output, out_format, source)
            if publish is None and uri_scheme(output) is not None:
                raise ValidationError(
                    "output",
                    fn,
                    f"a plain path (the {self.engine.name} engine writes files on this "
                    "machine; the spark engine writes Parquet to its own file systems)",
                    output,
                )
        rng = default_source(seed)
        answered: dict[Request, Any] = {}
        try:
            named = (fn, dict(parameters or {}))
            draw = self._prepare(releasable, source, requests, fields, answered, rng, named)
            return self._charged(
                cost,
                releasable.name,
                nb,
                draw,
                encode=lambda r: r.encode(out_format or "csv", escape_formulas=escape_formulas),
                output=output,
                event=event,
                publish=publish,
            )
        finally:
            for answer in answered.values():
                if isinstance(answer, Closeable):
                    answer.close()

    def _prepare(
        self,
        releasable: Releasable,
        source: Any,
        requests: tuple[Request, ...],
        fields: Fields,
        answered: dict[Request, Any],
        rng: Any,
        named: tuple[str, dict[str, str]],
    ) -> Callable[[], Release]:
        """Read the data (the engine answers the requests, before the spend) and return the
        draw (run inside it). A per-key mechanism draws where the data lives when the session's
        noise is on the executors and the engine can (:class:`KeyedDraw`). A parameter the
        engine refuses (a column not in the data, a file that does not exist) is named as the
        method names it (``named``: its name, and its names of the engine's parameters), not as
        the engine's own step does."""
        function, names = named

        def compute(request: Request) -> Any:
            try:
                return self.engine.compute(source, request, rng, progress=self.progress)
            except (ValidationError, MissingInputError) as exc:
                parameter = names.get(exc.parameter, exc.parameter)
                if (exc.function, exc.parameter) == (function, parameter):
                    raise
                if isinstance(exc, MissingInputError):
                    raise exc.for_function(function, parameter) from exc
                raise ValidationError(parameter, function, exc.expected, exc.got) from exc

        if self.noise_on == "executors" and len(requests) == 1:
            (only,) = requests
            if isinstance(only, KeyCounts) and type(only) is KeyCounts:
                keyed = KeyedDraw(
                    only.fields, only.max_partitions, only.max_per_partition, releasable
                )
                if self.engine.supports(keyed):
                    prepared = compute(keyed)
                    answered[keyed] = prepared
                    return self._engine_named(prepared)
        with self.engine.reading(source):
            for request in requests:
                answered[request] = compute(request)
        answers = Answers(answered, compute, fields)

        def draw() -> Release:
            release = self._engine_named(lambda: releasable.draw(answers, rng))()
            release.diagnostics.setdefault("noise", "driver")
            return release

        return draw

    def _engine_named(self, draw: Callable[[], Release]) -> Callable[[], Release]:
        def named() -> Release:
            release = draw()
            release.diagnostics.setdefault("engine", self.engine.name)
            return release

        return named

    def _charged(
        self,
        cost: Budget,
        name: str,
        neighbouring: Any,
        draw: Callable[[], Release],
        *,
        encode: Callable[[Release], bytes],
        output: str | os.PathLike[str] | None,
        event: Any,
        publish: Callable[[Release], Callable[[], object] | None] | None,
    ) -> Release:
        """Run ``draw`` as one spend of ``cost``, then publish.

        The draw and the in-memory encoding of its output (``encode``) run inside the ledger
        transaction; the file ``output`` is written atomically only after the spend is committed.
        An engine that writes its own output (Spark's Parquet datasets) gives ``publish``
        instead: called inside the transaction with the release, it prepares in memory and
        returns the function that stages and publishes ``output`` after the commit (None:
        ``encode`` as usual). This is the one place where the pipeline draws, charges and
        publishes.
        """
        data: bytes | None = None
        write: Callable[[], object] | None = None
        checkpoint("read")
        with self._charge(cost, name, neighbouring, event):
            result = draw()
            checkpoint("drawn")
            if output is not None and publish is not None:
                write = publish(result)
            if output is not None and write is None:
                data = encode(result)
            if write is not None or data is not None:
                checkpoint("encoded")
        checkpoint("committed")
        if write is not None:
            write()
        elif output is not None and data is not None:
            write_bytes_atomic(output, data)
        return result

    @contextmanager
    def _charge(self, cost: Budget, name: str, nb: Any, event: Any) -> Iterator[None]:
        if not self.charging:
            yield
            return
        assert self.ledger is not None and self.dataset is not None
        with self.ledger.spend(self.dataset, cost, name, neighbouring=nb, event=event):
            yield

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
        max_partitions: int | Literal["auto"] | None = None,
        max_per_partition: int | Literal["auto"] | None = None,
        keys_only: bool = False,
        domain: Sequence[Any] | npt.ArrayLike | str | os.PathLike[str] | None = None,
        confidence: float = 0.95,
        options: Mapping[str, Any] | None = None,
        input_format: str | None = None,
        key_type: Literal["str", "int"] | None = None,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json", "parquet"] | None = None,
        escape_formulas: bool = True,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """Release a private histogram of the keys of ``source``: one row per released key with
        its noisy ``count`` (and a confidence interval ``lower``/``upper`` where the mechanism
        gives one), keys in sorted order.

        Args:
            source: a file path (CSV/TSV, Parquet, NDJSON, text, FIMI) or a table the engine
                reads (local engine: pandas, Polars or pyarrow; Spark engine: Spark DataFrames).
            epsilon, delta: the guarantee of the release (its cost).
            key: the key column (not needed for text and FIMI files).
            user: the user column for user-level privacy (``True`` for text/FIMI files: each
                line is a user; FIMI files are always user-level).
            mechanism: a registered mechanism name, a weighted selector (``wgm``, ``dp-sips``,
                ``cumulative-sips``), ``vote-selection`` (user-level, no cap), or ``"default"``
                (the planner's choice; user-level data with a delta: the user-level plan of
                :func:`privhist.planning.user_level.choose`, which with no cap decides between
                vote selection and cumulative-sips inside the spend and with a cap ranks every
                key selector; a dry run's ``details["choice"]`` says how).
            max_partitions, max_per_partition: the contribution bounds ``k`` and ``c`` for
                user-level data. ``max_partitions="auto"`` spends 5% of the budget on a DP
                quantile of users' key counts, in the same spend; ``max_per_partition="auto"``
                does the same for ``c`` with users' most records on one key (per-key
                mechanisms).
            keys_only: release keys without counts.
            domain: a public domain of keys (a sequence, or a file with one key per line).
            confidence: the confidence of intervals.
            options: further options of the mechanism (``privhist plan MECHANISM --help``).
            input_format: the file format when the name does not tell.
            key_type: ``"str"`` or ``"int"``; never inferred from the data.
            columns: the column names of a CSV file that has no header line.
            separator: the field separator of a CSV file.
            output: write the release here (CSV, JSON or Parquet), atomically and only after the
                spend is committed; refused if it is the input file or the ledger.
            output_format: ``csv``, ``json`` or ``parquet`` (default: from ``output``'s name).
            escape_formulas: escape CSV keys a spreadsheet would run as formulas.
            seed: reproducible, NOT private randomness (never charged).
            dry_run: return a :class:`DryRun` instead, reading no data and spending nothing.

        Returns:
            The :class:`~privhist.io.release.Release` (or a :class:`DryRun`).

        Example:
            >>> import polars as pl
            >>> from privhist import Session
            >>> visits = pl.DataFrame({"page": ["home"] * 300 + ["faq"] * 200 + ["x"] * 2})
            >>> r = Session().histogram(visits, key="page", epsilon=1, delta=1e-8, seed=1)
            >>> r.to_pandas()["key"].tolist()
            ['faq', 'home']
        """
        fn = "histogram"
        self._open(fn)
        eps = check_epsilon(checks.number(epsilon, "epsilon", fn), fn, maximum=MAX_EPSILON)
        dl = check_delta(checks.number(delta, "delta", fn), fn, normal=True)
        path = source if isinstance(source, str | os.PathLike) else None
        fimi = path is not None and (
            input_format == "fimi" or (input_format is None and _is_fimi(path))
        )
        fields = checks.fields(
            fn,
            key=key,
            user_column=user,
            input_format=input_format,
            key_type=key_type,
            column_names=columns,
            separator=separator,
        )
        if key is None and not (input_format == "text" or fimi):
            raise ValidationError("key", fn, "a column name", None)
        if fimi and fields.user is None:
            # FIMI baskets are users by the format's definition
            fields = Fields(fields.key, True, fields.reading)
        k = checks.cap(max_partitions, "max_partitions", fn)
        c = checks.cap(max_per_partition, "max_per_partition", fn)
        checks.flag(keys_only, "keys_only", fn)
        confidence = checks.number(confidence, "confidence", fn)
        if options is not None and not isinstance(options, Mapping):
            raise ValidationError("options", fn, "a mapping of option names to values", options)
        opts = dict(options or {})
        if keys_only:
            opts["keys_only"] = True
        dom = read_domain(domain, fn)
        releasable, mech, details = build.histogram(
            fn,
            mechanism_name=mechanism,
            epsilon=eps,
            delta=dl,
            user_level=fields.user_level,
            max_partitions=k,
            max_per_partition=c,
            domain=dom,
            confidence=confidence,
            options=opts,
            votes=fields.user_level and self.engine.supports(UserVotes(fields)),
        )
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            escape_formulas=escape_formulas,
            seed=seed,
            dry_run=dry_run,
            details=details,
            mechanism=mech,
        )

    @naming_the_method("heavy-hitters")
    def heavy_hitters(
        self,
        source: Any,
        *,
        epsilon: float,
        delta: float,
        key: str | None = None,
        levels: int | None = None,
        level_epsilon: float | None = None,
        alphabet: str | None = None,
        terminator: str | None = None,
        drop_unknown: bool = False,
        one_shot: bool = False,
        secure_sum: Literal["ideal", "secagg", "secagg+"] = "ideal",
        confidence: float = 0.95,
        input_format: str | None = None,
        key_type: Literal["str", "int"] | None = None,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json", "parquet"] | None = None,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """TrieHH++ heavy hitters over one item per record (Bharadwaj & Cormode 2022, Section
        4.1), or with ``one_shot`` one sample-and-threshold histogram of whole items: one row
        per item with its ``sampled_count``, the ``estimate`` of its number of clients and a
        ``confidence`` interval ``lower``/``upper`` for that number. Items of any type are read
        as text over ``alphabet`` (default: lower-case letters, digits and ``'``).

        Args:
            source: a file path or a table the engine reads (text files: one item per word).
            epsilon, delta: the guarantee of the whole run.
            key: the item column (not needed for text files).
            levels: trie levels ``L`` (longest item found; default 10).
            level_epsilon: the epsilon of each level (default: the largest that composes to
                ``epsilon``).
            alphabet, terminator: the characters items are spelled with, and the end mark.
            drop_unknown: drop items with other characters (counted) instead of refusing.
            one_shot: one histogram of whole items instead of the trie.
            secure_sum: sum each level's votes by ``secagg`` or ``secagg+`` (simulated
                protocol) instead of the ideal sum; the output is the same.
            confidence: the confidence of the intervals.
            input_format, key_type, columns, separator: how files are read (see
                :meth:`histogram`).
            output, output_format, seed, dry_run: as :meth:`histogram`.

        Example:
            >>> import polars as pl
            >>> from privhist import Session
            >>> words = pl.DataFrame({"w": ["apple"] * 4000 + ["pear"] * 3000 + ["fig"] * 5})
            >>> r = Session().heavy_hitters(words, key="w", epsilon=2, delta=1e-6, seed=1)
            >>> r.keys.tolist()
            ['apple', 'pear']
        """
        fn = "heavy-hitters"
        self._open(fn)
        fields = checks.fields(
            fn,
            key=key,
            input_format=input_format,
            key_type=key_type,
            column_names=columns,
            separator=separator,
        )
        if input_format != "text" and key is None:
            raise ValidationError("key", fn, "given for a table (or use the text format)", None)
        for param, flag in (("drop_unknown", drop_unknown), ("one_shot", one_shot)):
            checks.flag(flag, param, fn)
        checks.optional_int(levels, "levels", fn)
        releasable, mech, details = build.heavy_hitters(
            fn,
            epsilon=checks.number(epsilon, "epsilon", fn),
            delta=checks.number(delta, "delta", fn),
            levels=levels,
            level_epsilon=level_epsilon,
            alphabet=alphabet,
            terminator=terminator,
            drop_unknown=drop_unknown,
            one_shot=one_shot,
            secure_sum=secure_sum,
            confidence=checks.number(confidence, "confidence", fn),
        )
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            seed=seed,
            dry_run=dry_run,
            details=details,
            mechanism=mech,
        )

    @naming_the_method("quantiles")
    def quantiles(
        self,
        source: Any,
        *,
        column: str,
        q: Sequence[float] | float,
        lower: float,
        upper: float,
        epsilon: float,
        delta: float,
        method: Literal["hierarchical", "binary-search"] = "hierarchical",
        levels: int = 8,
        branching: int = 2,
        confidence: float = 0.95,
        clamp: bool = False,
        sampling_rate: float | None = None,
        threshold: int | None = None,
        alpha: float | None = None,
        composition: Literal["pld", "basic"] | None = None,
        cohort_size: int | None = None,
        clients: int | None = None,
        input_format: str | None = None,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json", "parquet"] | None = None,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """Private quantiles of a numeric column (Bharadwaj & Cormode 2022, Section 4.2): one
        row per level ``q`` with its ``value``, the bucket ``[bucket_lower, bucket_upper]`` the
        answer lies in (the resolution ``(upper - lower) / branching**levels``, not a
        confidence interval) and the plug-in rank errors (pruning, sampling) at
        ``confidence``.

        Args:
            source: a file path or a table the engine reads.
            column: the numeric column (cells are parsed one by one; empty and non-numeric
                cells are dropped and counted).
            q: the quantile levels in [0, 1].
            lower, upper: the public range ``[lower, upper)`` of the values.
            epsilon, delta: the guarantee of the whole release.
            method: one ``hierarchical`` release for all levels, or ``binary-search`` rounds.
            levels: levels of the hierarchy (binary search: rounds per quantile).
            branching: branching of the hierarchy.
            confidence: the confidence of the rank errors.
            clamp: move values outside the range to its ends (counted) instead of refusing.
            sampling_rate, threshold, alpha: the calibration of each sample-and-threshold
                release (default: from epsilon and delta).
            composition: how the budget is split over the releases (levels, or search
                rounds): ``"pld"`` (the default) gives each the largest epsilon whose certified
                PLD composition is within ``(epsilon, delta)``, several times ``epsilon`` over
                their number; ``"basic"`` splits it evenly (the paper's Lemma 4.1).
            cohort_size, clients: binary search on fixed-size cohorts of ``cohort_size`` of
                ``clients`` (the public number of values; substitution neighbours).
            input_format, columns, separator: how files are read (see :meth:`histogram`).
            output, output_format, seed, dry_run: as :meth:`histogram`.

        Example:
            >>> import numpy as np, polars as pl
            >>> from privhist import Session
            >>> ages = pl.DataFrame({"age": np.arange(100_000) % 80 + 10})
            >>> r = Session().quantiles(ages, column="age", q=[0.5], lower=0, upper=128,
            ...                         epsilon=1, delta=1e-8, seed=2)
            >>> bool(45 <= r.estimates[0] <= 55)
            True
        """
        fn = "quantiles"
        self._open(fn)
        checks.name(column, "column", fn, optional=False)
        fields = checks.fields(
            fn, key=column, input_format=input_format, column_names=columns, separator=separator
        )
        checks.choice(method, "method", fn, ("hierarchical", "binary-search"))
        checks.flag(clamp, "clamp", fn)
        releasable, mech, details = build.quantiles(
            fn,
            q=q,
            lower=checks.number(lower, "lower", fn),
            upper=checks.number(upper, "upper", fn),
            epsilon=checks.number(epsilon, "epsilon", fn),
            delta=checks.number(delta, "delta", fn),
            method=method,
            levels=_int(levels, "levels", fn),
            branching=_int(branching, "branching", fn),
            confidence=checks.number(confidence, "confidence", fn),
            clamp=clamp,
            options={
                "sampling_rate": sampling_rate,
                "threshold": threshold,
                "alpha": alpha,
                "composition": composition,
                "cohort_size": cohort_size,
                "clients": clients,
            },
        )
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            seed=seed,
            dry_run=dry_run,
            details=details,
            mechanism=mech,
            parameters={"key": "column"},
        )

    @naming_the_method("range")
    def range_counts(
        self,
        source: Any,
        *,
        column: str,
        queries: Sequence[tuple[float, float]],
        lower: float,
        upper: float,
        epsilon: float,
        delta: float,
        levels: int = 8,
        branching: int = 2,
        confidence: float = 0.95,
        clamp: bool = False,
        sampling_rate: float | None = None,
        threshold: int | None = None,
        alpha: float | None = None,
        composition: Literal["pld", "basic"] | None = None,
        input_format: str | None = None,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json", "parquet"] | None = None,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """Private range counts of a numeric column from one hierarchical release (Bharadwaj &
        Cormode 2022, Section 4.2): one row per query ``[from, to)``, in query order, with the
        range answered (snapped to leaf boundaries), the ``estimate``, an exact ``confidence``
        interval ``lower``/``upper`` for the true count, and the pruning bounds.

        Args:
            source: a file path or a table the engine reads.
            column: the numeric column.
            queries: the ranges ``(A, B)``, each inside ``[lower, upper]``.
            lower, upper: the public range of the values.
            epsilon, delta: the guarantee of the release.
            levels, branching, confidence, clamp, sampling_rate, threshold, alpha, composition:
                as :meth:`quantiles`.
            input_format, columns, separator: how files are read (see :meth:`histogram`).
            output, output_format, seed, dry_run: as :meth:`histogram`.

        Example:
            >>> import numpy as np, polars as pl
            >>> from privhist import Session
            >>> ages = pl.DataFrame({"age": np.arange(100_000) % 80 + 10})
            >>> r = Session().range_counts(ages, column="age", queries=[(0, 64)], lower=0,
            ...                            upper=128, epsilon=1, delta=1e-8, seed=2)
            >>> bool(65_000 < r.estimates[0] < 70_000)
            True
        """
        fn = "range"
        self._open(fn)
        checks.name(column, "column", fn, optional=False)
        fields = checks.fields(
            fn, key=column, input_format=input_format, column_names=columns, separator=separator
        )
        checks.flag(clamp, "clamp", fn)
        releasable, mech, details = build.range_counts(
            fn,
            queries=list(queries) if isinstance(queries, list | tuple) else queries,
            lower=checks.number(lower, "lower", fn),
            upper=checks.number(upper, "upper", fn),
            epsilon=checks.number(epsilon, "epsilon", fn),
            delta=checks.number(delta, "delta", fn),
            levels=_int(levels, "levels", fn),
            branching=_int(branching, "branching", fn),
            confidence=checks.number(confidence, "confidence", fn),
            clamp=clamp,
            options={
                "sampling_rate": sampling_rate,
                "threshold": threshold,
                "alpha": alpha,
                "composition": composition,
            },
        )
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            seed=seed,
            dry_run=dry_run,
            details=details,
            mechanism=mech,
            parameters={"key": "column"},
        )

    @naming_the_method("sample")
    def weighted_sample(
        self,
        source: Any,
        *,
        key: str,
        epsilon: float,
        delta: float,
        weight: str | None = None,
        tau: float | None = None,
        k: int | None = None,
        k_budget: float = 0.1,
        scheme: Literal["ppswor", "priority"] = "ppswor",
        power: float = 1.0,
        max_frequency: int = 2000,
        keys_only: bool = False,
        aggregate: bool = False,
        frequency_rule: str = "integer-tokens",
        input_format: str | None = None,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json"] | None = None,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """A private weighted sample (Cohen, Geri, Sarlos & Stemmer, Algorithm 2) sanitised by
        the certified keys-and-frequencies sanitiser: one row per released key with its
        ``token``, frequency ``estimate``, ``bias`` and ``variance``.

        Args:
            source: a file path or a table the engine reads.
            key: the key column.
            epsilon, delta: the guarantee of the release (element-level neighbours).
            weight: a column of positive integer frequencies (one row per key; ``aggregate``
                sums repeated keys); None: each row is one occurrence of its key.
            tau, k: the sampling threshold, or a sample size ``k`` whose threshold is set from
                a private total bought with ``k_budget`` of epsilon (exactly one of the two).
            scheme: ``ppswor`` or ``priority`` sampling.
            power: the sampling weight is ``frequency ** power`` (0, 1 or 2 with ``k``).
            max_frequency: frequencies above it are clamped to it before sampling.
            keys_only: release keys without frequencies.
            aggregate: sum the weights of repeated keys instead of refusing them.
            frequency_rule: ``integer-tokens`` (Algorithm 4) or ``max-separation``
                (Algorithm 5).
            input_format, columns, separator: how files are read (see :meth:`histogram`).
            output: a ``.csv`` or ``.json`` file (sealed with a row count and checksum, which
                ``privhist estimate`` checks); output_format, seed, dry_run: as
                :meth:`histogram`.

        Example:
            >>> import polars as pl
            >>> from privhist import Session
            >>> sales = pl.DataFrame({"item": ["a"] * 900 + ["b"] * 600 + ["c"] * 3})
            >>> r = Session().weighted_sample(sales, key="item", epsilon=1, delta=1e-6,
            ...                               tau=1.0, seed=3)
            >>> r.keys.tolist()
            ['a', 'b']
        """
        fn = "sample"
        self._open(fn)
        fields = checks.fields(
            fn, key=key, input_format=input_format, column_names=columns, separator=separator
        )
        checks.name(key, "key", fn, optional=False)
        checks.name(weight, "weight", fn)
        for param, value in (("keys_only", keys_only), ("aggregate", aggregate)):
            checks.flag(value, param, fn)
        if output is not None:
            suffix = Path(output).suffix.lower() if isinstance(output, str | os.PathLike) else ""
            if suffix not in (".csv", ".json"):
                raise ValidationError("output", fn, "a .csv or .json file", output)
        releasable, mech, details = build.weighted_sample(
            fn,
            epsilon=checks.number(epsilon, "epsilon", fn),
            delta=checks.number(delta, "delta", fn),
            weight=weight,
            tau=None if tau is None else checks.number(tau, "tau", fn),
            k=checks.optional_int(k, "k", fn),
            k_budget=checks.number(k_budget, "k_budget", fn),
            scheme=scheme,
            power=checks.number(power, "power", fn),
            max_frequency=_int(max_frequency, "max_frequency", fn),
            keys_only=keys_only,
            aggregate=aggregate,
            frequency_rule=frequency_rule,
        )
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            # a sample file is read back by privhist (sealed, keys as they are)
            escape_formulas=False,
            seed=seed,
            dry_run=dry_run,
            details=details,
            mechanism=mech,
        )

    @naming_the_method("federated-frequency")
    def federated_frequency(
        self,
        source: Any,
        *,
        epsilon: float,
        delta: float,
        user: str | bool,
        key: str = "key",
        protocol: Literal["tffe", "mffe"] = "tffe",
        theta: float = 0.2,
        bits: int = 8,
        max_items: int = 1,
        rounds: int = 1,
        eta: float = 1.0,
        domain: Sequence[Any] | str | os.PathLike[str] | None = None,
        domain_from_data: bool = False,
        top_d: int | None = None,
        frame: Literal["auto", "orthogonal", "hadamard"] = "auto",
        secure_sum: Literal["ideal", "secagg", "secagg+"] = "ideal",
        input_format: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json", "parquet"] | None = None,
        seed: int | None = None,
        dry_run: bool = False,
        progress: ProgressFactory | None = None,
        announce: Callable[[str], object] | None = None,
    ) -> Release | DryRun:
        """User-level federated frequency estimation, TFFE or MFFE (the federated-frequency
        paper, Section 5): one row per ``item`` with its estimated ``mean_count_per_user``; the
        metadata holds the calibration, the clipping thresholds and the error bounds. Its
        guarantee is for replace-one-user neighbours, which a ledger dataset does not keep: it
        is refused when the session charges a dataset.

        Args:
            source: a file path or a table the engine reads.
            epsilon, delta: the target guarantee (the metadata states the one spent).
            user: the user column (``True`` for text/FIMI files: each line is a user).
            key: the item column.
            protocol: ``tffe`` (two phases) or ``mffe`` (``rounds`` rounds, learning rate
                ``eta``).
            theta: cPBM's theta in (0, 1/4].
            bits: TFFE: ``2**bits`` bins of the private quantile.
            max_items: TFFE: the most items one user contributes.
            rounds, eta: MFFE's rounds and learning rate.
            domain: the public item domain (a sequence, or a file of one item per line); or
                ``domain_from_data`` (the items present, or the ``top_d`` most frequent: NOT
                private).
            frame: the tight frame of Kashin's representation.
            secure_sum: the ideal sum or a simulated SecAgg(+) protocol.
            input_format: the file format when the name does not tell.
            output, output_format, seed, dry_run: as :meth:`histogram`.
            progress: ``(label, total) -> advance(k)`` for a progress display.
            announce: called with each simulated secure-sum round's estimated cost before it
                runs (``secagg``/``secagg+``; a round too costly to run is refused).
        """
        fn = "federated-frequency"
        self._open(fn)
        if user is None or user is False:
            raise ValidationError("user", fn, "a user column (user-level data)", user)
        fields = checks.fields(fn, key=key, user_column=user, input_format=input_format)
        checks.flag(domain_from_data, "domain_from_data", fn)
        if self.charging:
            # its guarantee is for replacing one user's whole vector, a unit the ledger does not
            # keep
            raise ValidationError(
                "dataset",
                fn,
                "None: its guarantee is for replace-one-user neighbours, which the ledger's "
                "record and user units do not cover",
                self.dataset,
            )
        releasable, mech, details = build.federated_frequency(
            fn,
            epsilon=checks.number(epsilon, "epsilon", fn),
            delta=checks.number(delta, "delta", fn),
            protocol=protocol,
            theta=checks.number(theta, "theta", fn),
            bits=_int(bits, "bits", fn),
            max_items=_int(max_items, "max_items", fn),
            rounds=_int(rounds, "rounds", fn),
            eta=checks.number(eta, "eta", fn),
            frame=frame,
            domain=domain,
            domain_from_data=domain_from_data,
            top_d=checks.optional_int(top_d, "top_d", fn),
            secure_sum=secure_sum,
            progress=progress,
            announce=announce,
        )
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            seed=seed,
            dry_run=dry_run,
            details=details,
            mechanism=mech,
        )

    @naming_the_method("aggregate")
    def aggregate(
        self,
        source: Any,
        *,
        by: str | Sequence[str],
        metrics: Mapping[str, Metric],
        epsilon: float,
        delta: float = 0.0,
        user: str | None = None,
        max_partitions: int = 1,
        max_per_partition: int = 1,
        partitions: Sequence[Any] | Product | Any | None = None,
        confidence: float = 0.95,
        noise: Literal["auto", "gaussian", "laplace"] = "auto",
        weights: Mapping[str, float] | None = None,
        input_format: str | None = None,
        columns: Sequence[str] | None = None,
        separator: str | None = None,
        output: str | os.PathLike[str] | None = None,
        output_format: Literal["csv", "json", "parquet"] | None = None,
        escape_formulas: bool = True,
        seed: int | None = None,
        dry_run: bool = False,
    ) -> Release | DryRun:
        """Metrics per group (:mod:`privhist.analytics.aggregate`): counts, distinct users,
        sums, means, variances and quantiles of value columns, per combination of the ``by``
        columns, as one release charged once. One row per group: the group columns, then one
        column per metric (counts and sums with ``_lower``/``_upper`` confidence intervals;
        quantiles one column per level, ``name_q``).

        Args:
            source: a file path (CSV/TSV, Parquet, NDJSON) or a table the engine reads.
            by: the group column, or several.
            metrics: ``{output column: metric}`` built by :mod:`privhist.metrics`
                (``count()``, ``count_users()``, ``sum(column, lower, upper)``, ``mean``,
                ``variance``, ``quantiles(column, levels, lower, upper)``); bounds may be
                ``"auto"`` (a DP quantile of the values, inside the same spend). A value column
                must hold numbers: one of another type (a table's or a Parquet file's text,
                booleans, dates) is refused before any record is read; in a CSV file each
                cell is read on its own, and the records whose value is empty or not a number
                are left out of that column's metrics and counted (``diagnostics``,
                ``values_not_numbers``).
            epsilon, delta: the guarantee of the whole release (``delta`` > 0 unless the groups
                are public: groups chosen privately need it).
            user: the user column for user-level privacy (None: every record is its own unit).
            max_partitions, max_per_partition: the most groups a user contributes to and the
                most records a user contributes to one group (user level).
            partitions: None (groups chosen privately: cumulative-sips at user level, optimal
                partition selection at record level), or the public groups: a list of keys
                (tuples for several columns), a table of key rows, or
                ``metrics.product({column: values})``. Every public group gets a row; records of
                other groups are dropped (their number is in ``diagnostics``).
            confidence: the confidence of the intervals.
            noise: ``"auto"`` (the noise with the smaller predicted error for these
                parameters: Laplace when delta is 0), ``"gaussian"`` or ``"laplace"``; the
                choice is in the metadata (``noise``).
            weights: the budget split: ``{metric name: weight}`` (1 for a metric not named;
                each metric's share of the metrics' budget is its weight over their total), and
                with private groups ``"groups"``: the selection's weight against the metrics'
                total (default: one share beside each noisy component). The shares are in the
                metadata (``budget_split``, and each metric's ``budget_share``).
            input_format, columns, separator: how files are read (see :meth:`histogram`).
            output, output_format, escape_formulas, seed, dry_run: as :meth:`histogram`.

        Example:
            >>> import polars as pl
            >>> from privhist import Session
            >>> from privhist import metrics as m
            >>> sales = pl.DataFrame({"shop": ["a"] * 3000 + ["b"] * 2000,
            ...                       "amount": [10.0, 20.0] * 1500 + [5.0] * 2000})
            >>> r = Session().aggregate(sales, by="shop", epsilon=1, delta=1e-6, seed=2,
            ...                         metrics={"total": m.sum("amount", 0, 50),
            ...                                  "avg": m.mean("amount", 0, 50)})
            >>> t = r.to_pandas()
            >>> t["shop"].tolist(), t["avg"].round(0).tolist()
            (['a', 'b'], [15.0, 5.0])
        """
        fn = "aggregate"
        self._open(fn)
        group = (by,) if isinstance(by, str) else by
        if isinstance(group, str) or not isinstance(group, Sequence) or not group:
            raise ValidationError("by", fn, "a column name or a list of them", by)
        group = tuple(group)
        for c in group:
            checks.name(c, "by", fn, optional=False)
        if user is not None:
            checks.name(user, "user", fn, optional=False)
        if not isinstance(metrics, Mapping):
            raise ValidationError("metrics", fn, "a mapping of output names to metrics", metrics)
        fields = checks.fields(
            fn,
            key=group[0] if len(group) == 1 else None,
            user_column=user,
            input_format=input_format,
            column_names=columns,
            separator=separator,
        )
        if len(group) > 1:
            fields = check_fields(Fields(None, fields.user, fields.reading, group), fn)
        releasable = build.aggregate(
            fn,
            by=group,
            metrics=dict(metrics),
            epsilon=checks.number(epsilon, "epsilon", fn),
            delta=checks.number(delta, "delta", fn),
            user_level=user is not None,
            max_partitions=_int(max_partitions, "max_partitions", fn),
            max_per_partition=_int(max_per_partition, "max_per_partition", fn),
            partitions=partitions,
            confidence=checks.number(confidence, "confidence", fn),
            noise=noise,
            weights=weights,
        )

        def check_columns(dry: bool) -> None:
            # the columns named, against the source's schema (a dry run opens no file)
            named = [*group, *([user] if user else [])]
            named += [str(v.column) for v in metrics.values() if v.column is not None]
            kinds = _aggregate_columns(
                self.engine, source, fields.reading, fn, named, files=not dry
            )
            if kinds is not None:
                build.check_aggregate_columns(*kinds, group, user, dict(metrics), fn)

        details = {
            "groups": "public partitions" if partitions is not None else "chosen privately",
            "metrics": {k: v.describe() for k, v in metrics.items()},
        }
        return self.release(
            releasable,
            source,
            fields,
            function=fn,
            output=output,
            output_format=output_format,
            escape_formulas=escape_formulas,
            seed=seed,
            dry_run=dry_run,
            details=details,
            check=check_columns,
            parameters={"key": "by"},
        )

    def count(
        self,
        source: Any,
        request: KeyCounts,
        *,
        seed: int | None = None,
    ) -> Counts:
        """The engine's bounded counts of ``source`` (exact, NOT private: nothing is released).

        For building releases by hand; the counts themselves must never be published.
        """
        self._open("count")
        if not isinstance(request, KeyCounts):
            raise ValidationError("request", "Session.count", "a KeyCounts request", request)
        return self.engine.count(source, request, default_source(seed), progress=self.progress)

    # -- helpers -----------------------------------------------------------------------------

    def check_source(self, source: Any, function: str) -> None:
        """A typed error unless the session's engine reads ``source`` (no data is read); it
        names the kind of table it got (Polars, pandas and Spark tables are all ``DataFrame``)
        and, for another engine's table, the engine that reads it."""
        if not self.engine.accepts(source):
            package = type(source).__module__.split(".")[0]
            kind = type(source).__name__
            if package != "builtins":
                kind = f"{package} {kind}"
            expected = f"a file path or a table the {self.engine.name} engine reads"
            if package == "pyspark" and self.engine.name != "spark":
                expected += ' (a Spark DataFrame is read by Session(engine="spark"))'
            elif package in ("pandas", "polars", "pyarrow") and self.engine.name != "local":
                expected += (
                    " (a pandas, Polars or Arrow table is read by the local engine, Session(); "
                    "spark.createDataFrame(table) makes it a Spark DataFrame)"
                )
            raise ValidationError("source", function, expected, kind)

    def _check_output(
        self,
        releasable: Releasable,
        output: Any,
        output_format: Any,
        source: Any,
        fn: str,
    ) -> str | None:
        output = checks.path_or_none(output, "output", fn)
        if output_format is not None:
            checks.choice(output_format, "output_format", fn, ("csv", "json", "parquet"))
        # a release that is not rows (compact: a polynomial) names the formats it is written in
        formats = releasable.output_formats if isinstance(releasable, Mechanism) else None
        if output is None:
            if formats is not None:
                raise ValidationError(
                    "output",
                    f"{fn} with mechanism {releasable.name}",
                    f"a {' or '.join(formats)} file (CSV rows cannot hold this release)",
                    None,
                )
            if output_format is not None:
                raise ValidationError("output_format", fn, "given with output", output_format)
            return None
        if uri_scheme(output) is not None:
            # a file system of the engine's (hdfs://, file:/...): the engine's writer checks it
            # before the data is read; only rows can be written there
            fmt = resolve_write_format(PurePosixPath(output), output_format, fn)
            if formats is not None:
                raise ValidationError(
                    "output",
                    f"{fn} with mechanism {releasable.name}",
                    "a plain path (this release is one file written by this process)",
                    output,
                )
            return fmt
        inputs = [source if isinstance(source, str | os.PathLike) else None]
        fmt = check_output(output, output_format, inputs, self.ledger_path, fn)
        if formats is not None and fmt not in formats:
            raise ValidationError(
                "format", f"{fn} with mechanism {releasable.name}", " or ".join(formats), fmt
            )
        return fmt


def _aggregate_columns(
    engine: Engine,
    source: Any,
    reading: Reading,
    fn: str,
    wanted: Sequence[str],
    *,
    files: bool,
) -> tuple[dict[str, tuple[str, str]], str] | None:
    """The columns of an aggregation's ``source`` with their kinds, and how to name it in
    messages, from its schema alone (no record is read; the ``wanted`` columns of a pandas
    table's objects are typed as Polars converts them): a Spark DataFrame's, a table's, or
    with ``files`` and the local engine a file's (a Parquet schema, a CSV header); None when
    they are not known so (another engine reads the file where it lives)."""
    from privhist.engines.spark.aggregate import column_kinds as spark_kinds
    from privhist.engines.spark.aggregate import is_spark_frame

    if is_spark_frame(source):
        return spark_kinds(source), "the data"
    from privhist.engines.local import LocalEngine
    from privhist.engines.local.aggregate import column_kinds

    is_file = isinstance(source, str | os.PathLike)
    if is_file and (not files or not isinstance(engine, LocalEngine)):
        return None
    kinds = column_kinds(source, reading, fn, wanted)
    if kinds is None:
        return None
    return kinds, repr(os.fspath(source)) if is_file else "the table"


def _int(value: Any, name: str, fn: str) -> int:
    checked = checks.optional_int(value, name, fn, minimum=0)
    if checked is None:
        raise ValidationError(name, fn, "an integer", value)
    return checked


def _is_fimi(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).endswith((".dat", ".fimi"))
