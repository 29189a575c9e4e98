"""The library's version, recorded in every release's metadata (``"library": "privhist 0.1.0"``)."""

from __future__ import annotations

from typing import Final

__version__: Final[str] = "0.1.0"

#: how releases name the library that drew them
LIBRARY: Final[str] = f"privhist {__version__}"
