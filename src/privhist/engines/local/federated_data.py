"""Reading federated data from files: per-user count vectors (:class:`UserCounts`) and client
populations (:class:`Population`).

These readers live in ``io`` (not beside the classes in :mod:`privhist.federated`) so that the
federated protocols never import a reader or an engine: data flows from ``io`` and the engines
into the protocols, and imports point the same way.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.validation import check_positive_int
from privhist.engines.local import count
from privhist.federated.population import Population
from privhist.federated.user_data import UserCounts, _aggregate, from_records
from privhist.io.readers import FileFormat, scan, select_records

__all__ = [
    "read_domain",
    "read_msweb",
    "read_population",
    "read_user_counts",
    "user_counts_from_table",
]


def read_domain(path: str | os.PathLike[str], function: str = "read_domain") -> list[str]:
    """A public item domain: one key per line (surrounding blanks and empty lines ignored).

    Raises:
        InputDataError: the file is missing, empty or not UTF-8 text, or a key is listed twice.
    """
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InputDataError(f"{function}: domain file '{p}' does not exist")
    try:
        with open(p, encoding="utf-8") as fh:
            keys = [ln.strip() for ln in fh if ln.strip()]
    except UnicodeDecodeError as exc:
        raise InputDataError(
            f"{function}: domain file '{p}' is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    if not keys:
        raise InputDataError(f"{function}: domain file '{p}' is empty")
    if len(set(keys)) != len(keys):
        raise InputDataError(f"{function}: domain file '{p}' lists a key more than once")
    return keys


def read_msweb(path: str | os.PathLike[str], d: int) -> UserCounts:
    """The UCI ``anonymous-msweb.data`` file as user count vectors: ``C`` lines start a user,
    ``V,<area>,1`` lines are her visits; the ``d`` most visited areas (ties by id) are the items,
    chosen from the data (not private: for experiments and public data).

    The file interleaves users and visits (a visit names no user), so no format of
    :func:`privhist.io.readers.scan` reads it.

    Raises:
        InputDataError: the file holds no ``C``/``V`` records.
    """
    users: list[int] = []
    areas: list[int] = []
    current = -1
    with open(path, encoding="latin-1") as fh:
        for line in fh:
            if line.startswith("C,"):
                current += 1
            elif line.startswith("V,") and current >= 0:
                users.append(current)
                areas.append(int(line.split(",")[1]))
    if not users:
        raise InputDataError(f"{path}: no C/V records")
    a = np.asarray(areas)
    ids, counts = np.unique(a, return_counts=True)
    order = np.lexsort((ids, -counts))[:d]
    keep_ids = np.sort(ids[order])
    pos = np.searchsorted(keep_ids, a)
    ok = (pos < keep_ids.size) & (keep_ids[np.minimum(pos, keep_ids.size - 1)] == a)
    return from_records(np.asarray(users)[ok], pos[ok], dimension=keep_ids.size, labels=keep_ids)


def read_user_counts(
    path: str | os.PathLike[str],
    *,
    user: str | bool,
    key: str = "key",
    format: str | FileFormat | None = None,
    top_d: int | None = None,
    domain: Any = None,
) -> UserCounts:
    """Read ``(user, key)`` records with :func:`privhist.io.scan` into :class:`UserCounts`.

    With a public ``domain`` (a sequence of keys, compared as text): the items are exactly
    those keys in that order, records with other keys are ignored (their number is in
    ``info["keys_outside_domain"]``) and *every* user of the file is kept, a user with no key
    in the domain as the zero vector. Then the item labels, ``d`` and the number of users do
    not depend on which items anyone holds, as replace-one-user privacy requires (the set of
    users taking part is public in secure aggregation).

    Without a domain the items are the distinct keys (sorted), or the ``top_d`` most frequent
    keys (ties broken by key), and users with no record left are dropped (their number is in
    ``info["dropped_users"]``): both read the data and are not private (the paper's
    experiments).

    Raises:
        InputDataError: unreadable file, missing user column, or no records.
        ValidationError: both ``top_d`` and ``domain``, or an empty domain.
    """
    fn = "read_user_counts"
    if user is None or user is False:
        raise ValidationError("user", fn, "a user column (user-level data)", user)
    lf = scan(path, format=format, key=key, user=user, function=fn)
    return _from_records(lf, top_d, domain, os.fspath(path), fn)


def user_counts_from_table(
    table: Any,
    *,
    user: str | bool,
    key: str = "key",
    top_d: int | None = None,
    domain: Any = None,
) -> UserCounts:
    """:func:`read_user_counts` for a Polars ``DataFrame`` or ``LazyFrame`` with ``user`` and
    ``key`` columns (types as given; see :func:`privhist.io.readers.select_records`)."""
    fn = "user_counts_from_table"
    if not isinstance(user, str):
        raise ValidationError("user", fn, "a user column name", user)
    lf = select_records(table, key=key, user=user, function=fn, source="the table")
    return _from_records(lf, top_d, domain, "the table", fn)


def _from_records(lf: Any, top_d: int | None, domain: Any, label: str, fn: str) -> UserCounts:
    import polars as pl

    try:
        df = lf.drop_nulls().collect()
    except (pl.exceptions.PolarsError, OSError) as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise InputDataError(f"{fn}: cannot read {label}: {first}") from None
    if df.height == 0:
        raise InputDataError(f"{fn}: {label} has no records with a user and a key")
    if domain is not None:
        return _with_domain(df, domain, top_d, fn)
    freq = df.group_by("key").len().sort(["len", "key"], descending=[True, False])
    if top_d is not None:
        freq = freq.head(check_positive_int(top_d, fn, "top_d"))
    keys = freq.sort("key")["key"]
    lookup = pl.DataFrame({"key": keys, "item": np.arange(keys.len(), dtype=np.int64)})
    joined = df.join(lookup, on="key", how="inner")
    n_all = df["user"].n_unique()
    uid = joined["user"].rank("dense").cast(pl.Int64).to_numpy() - 1
    out = _aggregate(uid, joined["item"].to_numpy().astype(np.int64), keys.len(), keys.to_numpy())
    out.info.update({"users_in_file": n_all, "dropped_users": n_all - out.n_users})
    return out


def _with_domain(df: Any, domain: Any, top_d: int | None, fn: str) -> UserCounts:
    """:func:`read_user_counts` over a public domain (its notes): all users, the domain's items."""
    import polars as pl

    if top_d is not None:
        raise ValidationError("top_d", fn, "not given together with a public domain", top_d)
    keys = [str(k) for k in domain]
    if not keys or len(set(keys)) != len(keys):
        raise ValidationError("domain", fn, "a non-empty list of distinct keys", len(keys))
    lookup = pl.DataFrame({"key": keys, "item": np.arange(len(keys), dtype=np.int64)})
    joined = df.select(
        pl.col("user").rank("dense").cast(pl.Int64).alias("uid"),
        pl.col("key").cast(pl.String),
    ).join(lookup, on="key", how="left")
    n_all = int(df["user"].n_unique())
    inside = joined["item"].is_not_null().to_numpy()
    uid = joined["uid"].to_numpy()[inside] - 1
    item = joined["item"].fill_null(0).to_numpy()[inside]
    out = _aggregate(
        uid.astype(np.int64),
        item.astype(np.int64),
        len(keys),
        np.array(keys, dtype=object),
        n_users=n_all,
    )
    out.info.update(
        {
            "users_in_file": n_all,
            "dropped_users": 0,
            "keys_outside_domain": int(np.count_nonzero(~inside)),
        }
    )
    return out


def read_population(
    path: str | os.PathLike[str],
    *,
    key: str = "key",
    format: str | None = None,
    key_type: str | None = None,
    progress: bool = False,
) -> Population:
    """One client per record of a file, the record's ``key`` being the client's item.

    The file is read and counted by :func:`privhist.engines.local.count` (so every format
    and key-type rule of :mod:`privhist.io.readers` applies; ``text`` files give one client
    per word). Records with a null key are dropped and counted in ``info["null_keys"]``.

    Raises:
        InputDataError: the file is missing, unreadable or malformed, or has no records
            with a key.
    """
    counts = count(path, key=key, format=format, key_type=key_type, progress=progress)
    if len(counts) == 0:
        raise InputDataError(f"the population is empty: {os.fspath(path)} has no items")
    info = {k: v for k, v in counts.info.items() if k != "bounds_defaulted"}
    return Population(counts.keys, counts.counts.astype(np.int64), info)
