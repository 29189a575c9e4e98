"""The engines, named in one place.

``privhist ... --engine NAME``, ``Session(engine=NAME)`` and the docs take their names from
:data:`NAMES`; :func:`create` builds one (importing it only then: the Spark engine needs the
``spark`` extra). A new engine is one entry here and one :class:`~privhist.engines.base.Engine`
subclass answering the requests of :mod:`privhist.core.requests`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from privhist.core.errors import ValidationError

if TYPE_CHECKING:
    from privhist.engines.base import Engine


def _local(**options: Any) -> Engine:
    from privhist.engines.local.engine import LocalEngine

    return LocalEngine(**options)


def _spark(**options: Any) -> Engine:
    from privhist.engines.spark.engine import SparkEngine

    return SparkEngine(**options)


#: engine name -> (what it is, its factory)
ENGINES: Final[dict[str, tuple[str, Callable[..., Engine]]]] = {
    "local": ("this process (Polars and NumPy)", _local),
    "spark": ("Apache Spark (pip install 'privhist[spark]')", _spark),
}

#: the engine names, the default first
NAMES: Final[tuple[str, ...]] = tuple(ENGINES)


def create(name: str, function: str = "Session", **options: Any) -> Engine:
    """A new engine of ``name`` (one of :data:`NAMES`)."""
    if name not in ENGINES:
        raise ValidationError("engine", function, f"one of {', '.join(NAMES)}", name)
    return ENGINES[name][1](**options)


def resolve(engine: Engine | str | None, function: str) -> Engine:
    """``engine`` as an :class:`~privhist.engines.base.Engine`: an engine as it is, a name
    created, None the default (``local``)."""
    if engine is None:
        return create(NAMES[0], function)
    if isinstance(engine, str):
        return create(engine, function)
    from privhist.engines.base import check_engine

    return check_engine(engine, function)
