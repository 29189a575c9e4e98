"""The ``Releasable`` protocol: what the release path needs from anything it releases.

Every release of :class:`privhist.session.Session` -- a registered histogram mechanism, a weighted
user-level selector, heavy hitters, quantiles, range counts, a weighted sample, federated
frequency estimation -- is built from parameters and public bounds only, and then:

* states what it does: :meth:`Releasable.event` (the privacy event the ledger judges and keeps),
  :meth:`Releasable.guarantee` (its (epsilon, delta), never above the request) and
  :attr:`Releasable.neighbouring` (the relation the guarantee is for);
* declares what it asks of the data: :meth:`Releasable.requests` turns the caller's
  :class:`~privhist.core.requests.Fields` (which columns, how files are read) into requests
  (:mod:`privhist.core.requests`) that an engine answers before the spend;
* releases from the answers: :meth:`Releasable.draw` draws inside the ledger transaction, and may
  ask follow-up requests there (a cap chosen privately, then the counts under it) through
  :meth:`Answers.ask`.

So the release path (validate, dry run, charge, publish) is written once, in the session, and
every engine serves every release whose requests it supports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from privhist.accounting.composition import PrivacyEvent
from privhist.core.budget import Budget
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.requests import Fields, Request
from privhist.io.release import Release


class Answers:
    """The engine's answers to a releasable's requests, and a way to ask more.

    ``answers[request]`` (or :meth:`of` a request type) is the answer of a declared request,
    computed before the spend; :meth:`ask` computes a follow-up request inside the spend (what
    it asks may depend on noise drawn so far, e.g. a cap chosen privately); :attr:`fields` are
    the caller's fields the requests were made for.
    """

    def __init__(
        self, answered: Mapping[Request, Any], ask: Callable[[Request], Any], fields: Fields
    ) -> None:
        self._answered = dict(answered)
        self._ask = ask
        self.fields = fields

    def __getitem__(self, request: Request) -> Any:
        try:
            return self._answered[request]
        except KeyError:
            raise ValidationError(
                "request", "Answers", "a request the release declared", request.describe()
            ) from None

    def of(self, kind: type[Request]) -> Any:
        """The answer of the one declared request of type ``kind``."""
        found = [a for r, a in self._answered.items() if type(r) is kind]
        if len(found) != 1:
            raise ValidationError(
                "request", "Answers.of", f"one declared {kind.__name__} request", len(found)
            )
        return found[0]

    def ask(self, request: Request) -> Any:
        """The answer of ``request``, computed now by the engine."""
        return self._ask(request)


@runtime_checkable
class Releasable(Protocol):
    """What the release path needs from a release (see the module notes)."""

    @property
    def name(self) -> str:
        """The release's name in the ledger and the metadata (``stability``, ``quantiles``)."""
        ...

    @property
    def neighbouring(self) -> Neighbouring:
        """The neighbouring relation the guarantee is for."""
        ...

    def event(self) -> PrivacyEvent:
        """What the release does, for the accountant and the ledger."""
        ...

    def guarantee(self) -> Budget:
        """The (epsilon, delta) of :meth:`event` for :attr:`neighbouring`."""
        ...

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        """What the release asks of the data found at ``fields``."""
        ...

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        """Draw the release from the engine's answers."""
        ...
