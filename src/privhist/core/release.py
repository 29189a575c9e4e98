"""``Release``: what a mechanism publishes.

Keys come in a canonical, data-independent order (sorted), so the order of rows reveals nothing
beyond the set of released keys. ``values`` are the released (noisy or sampled) counts,
``estimates`` unbiased-or-stated frequency estimates where the mechanism gives them, ``lower`` /
``upper`` a confidence interval at ``metadata['confidence']`` for each estimate. ``metadata``
records the mechanism, its parameters, the guarantee, the neighbouring relation, the randomness
source and the library version. Writers live in :mod:`privhist.io.writers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Release:
    keys: npt.NDArray[Any]
    values: npt.NDArray[np.int64] | None = None
    estimates: npt.NDArray[np.float64] | None = None
    #: integer bounds for noisy integer counts, floats for scaled estimates
    lower: npt.NDArray[Any] | None = None
    upper: npt.NDArray[Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: exact, NON-private facts about the input for the data holder; never written out
    diagnostics: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def value_column(self) -> str:
        """The column name of ``values`` in tables and files (``count`` unless stated)."""
        return str(self.metadata.get("value_column", "count"))

    @property
    def private(self) -> bool:
        """Whether the release was drawn from a private (secure) random source."""
        return bool(self.metadata.get("randomness", {}).get("private", False))

    @property
    def has_intervals(self) -> bool:
        return self.lower is not None and self.upper is not None

    def columns(self) -> dict[str, npt.NDArray[Any]]:
        """The table of the release: ``key``, then ``count``, ``estimate``, ``lower``, ``upper``
        as the mechanism provides them. A mechanism whose released values are not noisy counts
        names their column in ``metadata['value_column']`` (``pws``: ``shifted_count``)."""
        out: dict[str, npt.NDArray[Any]] = {"key": self.keys}
        if self.values is not None:
            out[self.value_column] = self.values
        if self.estimates is not None:
            out["estimate"] = self.estimates
        if self.lower is not None and self.upper is not None:
            out["lower"] = self.lower
            out["upper"] = self.upper
        return out

    def as_dict(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.columns().items()}

    def to_polars(self) -> Any:
        """The release as a Polars ``DataFrame`` (columns as :meth:`columns`; raw keys)."""
        from privhist.io.writers import release_to_frame

        return release_to_frame(self)

    def to_arrow(self) -> Any:
        """The release as a pyarrow ``Table``, the metadata under the schema key ``privhist``
        (needs pyarrow)."""
        import json

        from privhist.io.writers import PARQUET_METADATA_KEY, metadata_to_json

        table = self.to_polars().to_arrow()
        meta = json.dumps(metadata_to_json(self), allow_nan=False, ensure_ascii=False)
        return table.replace_schema_metadata({PARQUET_METADATA_KEY: meta})

    def to_pandas(self) -> Any:
        """The release as a pandas ``DataFrame``, the metadata in ``DataFrame.attrs``
        (needs pandas)."""
        frame = self.to_polars().to_pandas()
        frame.attrs["privhist"] = dict(self.metadata)
        return frame

    def write(
        self,
        path: Any,
        format: str | None = None,
        *,
        escape_formulas: bool = True,
    ) -> Any:
        """Write the release atomically as CSV, JSON or Parquet (format from the name when
        None); see :mod:`privhist.io.writers`. Returns the path written."""
        from privhist.io.writers import check_destination, encode_release, write_bytes_atomic

        _, fmt = check_destination(path, format, "Release.write")
        data = encode_release(self, fmt, escape_formulas=escape_formulas, function="Release.write")
        return write_bytes_atomic(path, data)

    def lookup(self, key: Any) -> int | None:
        """The released count of ``key`` (None when the key was not released)."""
        i = int(np.searchsorted(self.keys, key))
        if i < len(self) and self.keys[i] == key and self.values is not None:
            return int(self.values[i])
        return None
