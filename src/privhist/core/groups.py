"""Group keys over several columns, as one text key every engine builds the same way.

A group of an aggregation is the combination of its values in the ``by`` columns. Engines count
and select keys of one column, so several columns are combined into one text key: each value is
written as text (integers in decimal), ``\\`` is written ``\\\\`` and the unit separator
``\\x1f`` is written ``\\s``, and the values are joined by ``\\x1f``. A record with a null in any
group column has a null key (dropped, counted). The encoding is a bijection on tuples of values
of fixed column types, so grouping by the key is grouping by the tuple; :func:`decode` gives the
tuple back from the column types.

>>> key = encode(("fr", 30, "a\\x1fb"))
>>> decode(key, ("str", "int", "str"))
('fr', 30, 'a\\x1fb')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: joins the encoded values of a key
SEPARATOR = "\x1f"

_UNESCAPE = re.compile(r"\\(.)")


def escape(text: str) -> str:
    """One value's text with ``\\`` and the separator escaped."""
    return text.replace("\\", "\\\\").replace(SEPARATOR, "\\s")


def encode(values: Sequence[Any]) -> str | None:
    """The text key of one combination of values (None when a value is None)."""
    if any(v is None for v in values):
        return None
    return SEPARATOR.join(escape(str(int(v)) if isinstance(v, int) else str(v)) for v in values)


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: SEPARATOR if m.group(1) == "s" else m.group(1), text)


def decode(key: str, types: Sequence[str]) -> tuple[Any, ...]:
    """The values of a text key, each of its column's type (``"int"`` or ``"str"``)."""
    parts = [_unescape(p) for p in key.split(SEPARATOR)]
    if len(parts) != len(types):
        raise ValueError(f"a key of {len(types)} values has {len(parts)}")
    return tuple(int(p) if t == "int" else p for p, t in zip(parts, types, strict=True))
