"""The ``Mechanism`` contract shared by every histogram mechanism.

A mechanism is constructed from privacy parameters and public bounds only — never from data — and
then releases any number of :class:`~privhist.core.data.Counts` with
:meth:`Mechanism.release`. Each mechanism also describes itself exactly:

* :meth:`Mechanism.guarantee` — the (epsilon, delta) it satisfies for its neighbouring relation:
  the accountant's guarantee of :meth:`Mechanism.event`, never above the calibrated pair;
* :meth:`Mechanism.key_budget` — what it guarantees for one key whose count changes by at most
  ``max_contributions_per_partition``: every built-in mechanism acts on keys independently, so the
  guarantee for a neighbouring step that touches ``l0`` keys is the basic composition of ``l0``
  per-key guarantees (``key_budget() * l0 == guarantee()``);
* :meth:`Mechanism.key_distribution` — the exact output distribution of one key (``NOT_RELEASED``
  is an output) given its unit and record counts, which the tests feed to the exact
  privacy-profile tool;
* :meth:`Mechanism.reporting_probability` — Pr[a key with true count i is released].
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.budget import Budget
from privhist.core.constraints import naming_the_class as naming_the_class
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring, Relation
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.requests import Fields, KeyCounts, Request
from privhist.core.validation import MAX_EPSILON, Constraint, delta_constraint
from privhist.core.version import LIBRARY
from privhist.io.release import Release

if TYPE_CHECKING:
    from privhist.accounting.composition import PrivacyEvent
    from privhist.mechanisms.releasable import Answers


@dataclass(frozen=True)
class Option:
    """A mechanism-specific option, declared once for the Python API, the CLI and ``plan``.

    ``constraint`` states what it accepts (:class:`~privhist.core.validation.Constraint`); the
    constructor checks the value against it (:meth:`Mechanism.check_option`) and the contract
    tests generate invalid values from it. Options with ``choices`` or of kind ``bool`` get
    theirs from those fields when none is given.
    """

    name: str  # Python keyword; the CLI flag is --name-with-dashes
    kind: type = float  # float, int, str or bool (a flag)
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] | None = None
    constraint: Constraint | None = None

    def __post_init__(self) -> None:
        if self.constraint is None and self.choices is not None:
            derived = Constraint.one_of(*self.choices, optional=self.default is None)
            object.__setattr__(self, "constraint", derived)
        elif self.constraint is None and self.kind is bool:
            object.__setattr__(self, "constraint", Constraint.flag())

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class KeyDistribution:
    """The output distribution of one key: ``output -> probability`` (mpmath numbers).

    ``tail`` bounds the probability of outputs not listed (truncated noise support); the privacy
    check adds it to the divergence, so truncation can only make the check stricter.
    """

    probabilities: dict[Any, Any]
    tail: Any = field(default_factory=lambda: mpmath.mpf(0))


def covers(mechanism: Neighbouring, data: Neighbouring) -> bool:
    """Whether a guarantee for ``mechanism``'s relation protects data bounded as ``data``."""
    if data.relation is Relation.USER:
        return (
            mechanism.relation is Relation.USER
            and mechanism.max_partitions_contributed >= data.max_partitions_contributed
            and mechanism.max_contributions_per_partition >= data.max_contributions_per_partition
        )
    return True


class Mechanism(ABC):
    """Base class of histogram mechanisms. Subclasses register with
    :func:`privhist.mechanisms.registry.register`."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: releases only keys present in the data (no public domain needed)
    sparse: ClassVar[bool] = True
    needs_domain: ClassVar[bool] = False
    requires_delta: ClassVar[bool] = False
    options: ClassVar[tuple[Option, ...]] = ()
    #: the file formats a release is written in when it is not rows (``compact``: a
    #: polynomial); None: any table format
    output_formats: ClassVar[tuple[str, ...] | None] = None
    #: what epsilon accepts (the finite histograms narrow it to (0, 1])
    epsilon_constraint: ClassVar[Constraint] = Constraint.real(
        0, MAX_EPSILON, open_low=True, limit_note="the largest accepted"
    )
    confidence_constraint: ClassVar[Constraint] = Constraint.real(
        0, 1, open_low=True, open_high=True
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = naming_the_class(cls.__dict__["__init__"])  # type: ignore[method-assign]

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        confidence: float = 0.95,
    ) -> None:
        fn = self.function_name()
        self.epsilon: float = self.check_option("epsilon", epsilon)
        self.delta: float = self.check_option("delta", delta)
        #: the delta the release spends: the requested one, unless the mechanism is pure DP (then
        #: 0) or states its own (``self.delta`` always keeps what was asked for)
        self.delta_spent = self.delta
        if neighbouring is not None and not isinstance(neighbouring, Neighbouring):
            raise ValidationError("neighbouring", fn, "a Neighbouring", neighbouring)
        self.neighbouring = neighbouring or Neighbouring.add_remove()
        self.confidence: float = self.check_option("confidence", confidence)

    @classmethod
    def function_name(cls) -> str:
        """What error messages name: the public class the user called (``StabilityHistogram``)."""
        return cls.__name__

    @classmethod
    def constraints(cls) -> dict[str, Constraint]:
        """Every declared parameter constraint: epsilon, delta, confidence and each option's."""
        out = {
            "epsilon": cls.epsilon_constraint,
            "delta": delta_constraint(positive=cls.requires_delta, normal=True),
            "confidence": cls.confidence_constraint,
        }
        for option in cls.options:
            if option.constraint is None:
                raise TypeError(f"option {option.name!r} of {cls.__name__} declares no constraint")
            out[option.name] = option.constraint
        return out

    @classmethod
    def check_option(cls, name: str, value: Any) -> Any:
        """``value`` checked against (and converted by) the declared constraint of ``name``;
        a :class:`ValidationError` names the parameter and this class. A parameter a subclass
        does not offer (kh-prime has no ``beta1``) is checked against its base's declaration."""
        found = cls.constraints().get(name)
        for base in cls.__mro__:
            if found is not None:
                break
            declared = [o.constraint for o in getattr(base, "options", ()) if o.name == name]
            found = declared[0] if declared else None
        if found is None:
            raise TypeError(f"{cls.__name__} declares no constraint for {name!r}")
        return found.check(value, name, cls.function_name())

    # -- what the mechanism promises ------------------------------------------------------------

    def calibrated(self) -> Budget:
        """The (epsilon, delta) the parameters were calibrated to (``delta`` the one spent)."""
        return Budget(self.epsilon, self.delta_spent)

    def accounting_rules(self) -> tuple[str, ...] | None:
        """The accountant's rules the guarantee is chosen from (None: its defaults,
        :data:`privhist.accounting.accountant.DEFAULT_RULES`); a mechanism calibrated by another
        rule names it so that the accountant reproduces the calibration."""
        return None

    def guarantee(self) -> Budget:
        """The (epsilon, delta) guarantee for ``self.neighbouring``: the accountant's guarantee
        of :meth:`event` (:func:`privhist.accounting.accountant.guarantee_of`) at the calibrated
        delta, never above :meth:`calibrated` (the tests check it for every registered
        mechanism). Computed once per instance."""
        c = self.calibrated()
        cached: tuple[Budget, Budget] | None = self.__dict__.get("_guarantee")
        if cached is not None and cached[0] == c:
            return cached[1]
        from privhist.accounting.accountant import guarantee_of

        g = guarantee_of(
            self.event(), c.delta if c.delta > 0 else None, rules=self.accounting_rules()
        )
        self.__dict__["_guarantee"] = (c, g)
        return g

    def event(self) -> PrivacyEvent:
        """What the release does, for the accountant and the ledger
        (:mod:`privhist.accounting.events`): by default its calibrated (epsilon, delta)
        (:meth:`calibrated`); mechanisms whose noise has a Renyi curve or a dominating pair may
        say more.

        >>> from privhist.mechanisms.registry import get
        >>> get("stability")(1.0, 1e-6).event()
        ApproxDPEvent(epsilon=1.0, delta=1e-06, count=1)
        """
        from privhist.accounting.composition import ApproxDPEvent

        return ApproxDPEvent.from_budget(self.calibrated())

    @property
    def per_key_composable(self) -> bool:
        """Whether the guarantee is the basic composition of :meth:`key_budget` over the
        ``l0`` keys a neighbouring step touches (False when it comes from a tighter joint
        analysis, e.g. PLD composition of Gaussian noise; then tests check the joint
        distribution of the touched keys)."""
        return True

    def key_budget(self) -> Budget:
        """The per-key guarantee (see the module docstring)."""
        l0 = self.neighbouring.l0_sensitivity
        return Budget(self.epsilon / l0, self.delta_spent / l0)

    @abstractmethod
    def parameters(self) -> dict[str, Any]:
        """Thresholds, noise scales, ... as JSON-friendly values."""

    @abstractmethod
    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        """Entry i: probability that a key with true count i (i units) is released."""

    @abstractmethod
    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        """Exact output distribution of one key with ``units`` contributors and ``count``
        records."""

    def plan_details(self, max_count: int) -> dict[str, Any]:
        """Extra fields for ``privhist plan --json`` (e.g. alternative calibrations, exact
        deltas); merged into the plan after the common fields."""
        return {}

    def noise_std(self) -> float:
        """Standard deviation of the noise on a released count (0 when counts are exact, NaN
        when the mechanism releases no counts)."""
        return math.nan

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        """Small instances for the contract tests (every registered mechanism provides some)."""
        return []

    # -- releasing ------------------------------------------------------------------------------

    def release(self, counts: Counts, rng: RandomSource | None = None) -> Release:
        """Release ``counts``. The randomness defaults to :class:`SecureRandom`."""
        fn = self.function_name()
        if not isinstance(counts, Counts):
            raise ValidationError("counts", fn, "a privhist Counts object", type(counts).__name__)
        if rng is None:
            rng = SecureRandom()
        if not isinstance(rng, RandomSource):
            raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
        if not covers(self.neighbouring, counts.neighbouring):
            raise ValidationError(
                "neighbouring",
                fn,
                f"a relation covering the data's ({counts.neighbouring.describe()})",
                self.neighbouring.describe(),
            )
        keys, columns = self._draw(counts, rng)
        meta = self.metadata(rng)
        diagnostics = {**counts.info, **columns.pop("info", {})}
        meta["released_keys"] = int(keys.shape[0])
        return Release(keys=keys, metadata=meta, diagnostics=diagnostics, **columns)

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        """What the release asks of the data (:mod:`privhist.mechanisms.releasable`): the counts
        per key, bounded as this mechanism's relation says for user-level ``fields``."""
        nb = self.neighbouring
        if fields.user_level:
            k, c = nb.max_partitions_contributed, nb.max_contributions_per_partition
            return (KeyCounts(fields, k, c),)
        return (KeyCounts(fields),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        """The release of the engine's counts (:meth:`release`)."""
        counts: Counts = answers.of(KeyCounts)
        release = self.release(counts, rng)
        release.diagnostics.setdefault("distinct_keys_counted", len(counts))
        return release

    @abstractmethod
    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        """Return the released keys (sorted) and the Release columns (``values``, ``estimates``,
        ``lower``, ``upper``; an optional ``info`` dict of exact input facts is merged into the
        release's non-private ``diagnostics``)."""

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        g = self.guarantee()
        meta: dict[str, Any] = {
            "mechanism": self.name,
            "parameters": self.parameters(),
            "guarantee": {
                "epsilon": g.epsilon,
                "delta": g.delta,
                "neighbouring": self.neighbouring.describe(),
                "statement": f"{g} under {self.neighbouring.describe()} neighbours",
            },
            "neighbouring": self.neighbouring.to_dict(),
            "confidence": self.confidence,
            "library": LIBRARY,
        }
        if rng is not None:
            meta["randomness"] = rng.to_dict()
            if not rng.private:
                meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return meta
