"""Parquet releases written by Spark on the destination's file system: a dataset staged beside
its destination and published by one rename, only after the release's spend is committed.

When a release drawn by :class:`~privhist.engines.spark.SparkEngine` goes to a Parquet
destination, the released rows are written by Spark itself as a Parquet dataset, from the rows of
the release the driver already holds (the release is collected there in any case, so nothing is
recomputed from the source after the spend): the destination becomes a directory holding a part
file in canonical key order, plus ``_privhist.json``, the release metadata with its integrity
entry (row count, :mod:`privhist.io.integrity`). Readers of Parquet datasets (Spark, Arrow,
Polars) skip files whose names start with ``_``.

Where the files go
------------------
The destination is a plain path (a file on this machine, as everywhere in privhist; Spark is
given its ``file:`` URI) or a URI naming one of Spark's file systems
(``hdfs://nn/releases/r.parquet``, ``file:/mnt/shared/r.parquet``). Every file of the dataset,
the metadata included, is written on that file system, and who does what depends on the session:

* **classic** (this process is the Spark driver): the driver works through Hadoop's
  ``FileSystem`` API on the destination's own file system -- it checks that the destination does
  not exist, writes ``_privhist.json`` into the staged dataset and renames the staged directory
  with ``FileContext.rename`` without overwrite (which fails if the destination appeared
  meanwhile). Only file systems whose directory rename is one atomic step are used
  (:data:`ATOMIC_RENAME`: local and mounted file systems, HDFS and its views). Object stores
  (``s3a``, ``gs``, ``abfs``, ``wasb``, ``dbfs``, ...) rename a directory by copying it file by
  file, so a reader could see part of a release, or a failure leave part of one: refused, with
  the scheme named.
* **Spark Connect** (this process is a client; it has no file-system API on the server's side):
  only a destination on a file system this process shares with the server (a plain path or a
  ``file:`` URI: a server on this machine, or a mount both see). Spark writes the part files;
  this process writes the metadata and renames the staged directory. Other schemes are refused.

Where the files Spark writes might not be where the publishing side looks -- a ``file:``
destination on a cluster (a classic session whose master is not local: executors write on their
own disks) and every destination through Spark Connect -- a **probe** runs before the data is
read: Spark writes a one-row dataset holding a random token into a hidden directory beside the
destination, and the publishing side reads the token back, writes a file into that directory,
renames it and removes it (the steps of publishing). If any step fails the release is refused
before anything is read or spent, and the message says which file system is not shared.

The steps
---------
The order keeps the rule of :mod:`privhist.io.writers` (no unpaid release on disk) and the one of
the release path (a failure before the commit spends nothing):

0. before the data is read: the destination's checks and, where needed, the probe;
1. inside the ledger transaction, the draw runs (on the executors for per-key noise) and its rows
   are collected into the release on the driver, and the metadata is encoded in memory: a
   failing or killed job leaves no spend and nothing on disk;
2. the spend is committed;
3. Spark writes the rows, sorted by key, into a hidden directory beside the destination
   (``.NAME.XXXX.tmp``), the publishing side adds ``_privhist.json`` and syncs it, and the
   directory is renamed to the destination in one step. A failure removes the hidden directory
   and raises (the spend is kept: the rows could have escaped); a kill leaves at most the hidden
   directory, whose spend is recorded.

The destination must not exist (a dataset directory cannot be renamed over a file or another
dataset in one step): it is refused before anything is spent.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from privhist.core.errors import ValidationError
from privhist.core.faults import checkpoint
from privhist.engines.spark.sessions import is_connect
from privhist.io.files import local_uri, uri_scheme
from privhist.io.release import Release

#: the metadata file inside a released dataset
METADATA_FILE: Final[str] = "_privhist.json"

#: file systems whose directory rename is one atomic step: POSIX ``rename(2)`` on a local or
#: mounted disk, and the HDFS NameNode's rename (HDFS, its federated views, its REST gateway)
ATOMIC_RENAME: Final[frozenset[str]] = frozenset({"file", "hdfs", "viewfs", "webhdfs", "swebhdfs"})

_FN: Final[str] = "histogram on the Spark engine"


def parquet_publisher(
    spark: Any, output: str | os.PathLike[str], format: str | None
) -> Callable[[Release], Callable[[], str] | None] | None:
    """The Parquet writer of ``output``, or None for other formats (they are encoded on the
    driver). Called before the data is read: it checks the destination (refused if it exists,
    if its file system has no atomic rename, or if the publishing side cannot see what Spark
    writes; see the module notes). It returns the function that is called with the drawn
    release inside the transaction, encodes the metadata in memory and returns the function
    that writes and publishes after the commit (or None for a release that is not rows, e.g.
    ``compact``'s polynomial: the driver writes its single file, which ``read_compact`` reads
    back)."""
    if format != "parquet":
        return None
    site = site_of(spark, output)
    site.check()

    def prepare(release: Release) -> Callable[[], str] | None:
        from privhist.io.integrity import seal_metadata
        from privhist.io.writers import metadata_to_json
        from privhist.mechanisms.registry import get_or_none

        cls = get_or_none(str(release.metadata.get("mechanism")))
        if cls is not None and cls.output_formats is not None:
            return None

        meta = seal_metadata(metadata_to_json(release, "histogram"), None, row_count=len(release))
        encoded = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")
        frame = _driver_frame(spark, release)

        def publish() -> str:
            return write_dataset(frame, site, encoded)

        return publish

    return prepare


def _driver_frame(spark: Any, release: Release) -> Any:
    """The rows of a release drawn on the driver, as a Spark DataFrame in the release's
    (canonical) order: one partition, written as one part file."""
    from privhist.io.writers import release_to_frame

    return spark.createDataFrame(release_to_frame(release).to_pandas()).coalesce(1)


def write_dataset(frame: Any, site: Site, metadata: bytes) -> str:
    """Write ``frame`` (in canonical key order) as a Parquet dataset with ``metadata`` in a
    hidden directory beside the destination of ``site``, then rename it to the destination
    (module notes). A failure removes the hidden directory and raises an error naming the
    destination."""
    staging = site.sibling("tmp")
    try:
        frame.write.parquet(staging)
        site.write_bytes(f"{staging}/{METADATA_FILE}", metadata)
        checkpoint("staged")
        site.rename(staging, site.uri)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            site.remove(staging)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"cannot write {site.shown}: {exc.strerror or exc}") from None
        if isinstance(exc, Exception):  # Spark's own errors (Py4JJavaError, AnalysisException)
            raise OSError(errno.EIO, f"cannot write {site.shown}: {_first_line(exc)}") from exc
        raise
    checkpoint("published")
    return site.shown


class Site:
    """Where a dataset is published: the destination's URI (what Spark writes), its path on
    this machine (plain paths and ``file:`` URIs), and the file operations of the publishing
    side. Subclasses: :class:`DriverSite` (Hadoop's API on the driver), :class:`ClientSite`
    (this machine's file system, for Spark Connect)."""

    def __init__(self, spark: Any, shown: str, uri: str, local: Path | None) -> None:
        self.spark = spark
        #: the destination as the caller wrote it (for messages)
        self.shown = shown
        #: the destination's URI, as Spark writes it
        self.uri = uri
        #: the destination on this machine (None for other file systems)
        self.local = local

    def sibling(self, kind: str) -> str:
        """A new hidden name beside the destination (``.NAME.XXXX.kind``)."""
        parent, _, name = self.uri.rstrip("/").rpartition("/")
        return f"{parent}/.{name}.{secrets.token_hex(8)}.{kind}"

    # -- checks before the data is read ----------------------------------------------------

    def check(self) -> None:
        """Refuse, before any data is read, a destination that exists or whose directory is
        missing, and run the probe where the publishing side may not see Spark's files."""
        if self.exists(self.uri):
            raise ValidationError(
                "output",
                _FN,
                "a Parquet destination that does not exist yet (Spark writes a dataset directory)",
                self.shown,
            )
        parent = self.uri.rstrip("/").rpartition("/")[0]
        if not self.is_dir(parent):
            raise ValidationError("output", _FN, "a path in an existing directory", self.shown)
        if self.needs_probe():
            self.probe()

    def needs_probe(self) -> bool:
        return True

    def probe(self) -> None:
        """Spark writes a random token into a hidden directory beside the destination; this
        side reads it back, adds a file, renames and removes the directory (module notes)."""
        token = secrets.token_hex(16)
        first, second = self.sibling("probe"), self.sibling("probe")
        try:
            try:
                self.spark.createDataFrame([(token,)], "token string").coalesce(1).write.text(first)
                seen = self.read_text(first)
                if token not in seen:
                    raise OSError(errno.ENOENT, "the files Spark wrote are not visible here")
                self.write_bytes(f"{first}/{METADATA_FILE}", b"{}")
                self.rename(first, second)
            finally:
                for name in (first, second):
                    with contextlib.suppress(Exception):
                        self.remove(name)
        except Exception as exc:
            raise ValidationError(
                "output",
                _FN,
                f"a path on a file system that {self.publisher} and Spark's executors share "
                f"(Spark writes the dataset there and {self.publisher} publishes it: "
                f"{_first_line(exc)})",
                self.shown,
            ) from None

    #: who publishes, in messages
    publisher: str = "this process"

    # -- file operations (overridden) ------------------------------------------------------

    def exists(self, uri: str) -> bool:
        raise NotImplementedError

    def is_dir(self, uri: str) -> bool:
        raise NotImplementedError

    def read_text(self, uri: str) -> str:
        raise NotImplementedError

    def write_bytes(self, uri: str, data: bytes) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def remove(self, uri: str) -> None:
        raise NotImplementedError


class DriverSite(Site):
    """A classic session: the driver (this process) works through Hadoop's ``FileSystem`` API on
    the destination's file system."""

    publisher = "the Spark driver"

    def __init__(self, spark: Any, shown: str, uri: str, local: Path | None) -> None:
        super().__init__(spark, shown, uri, local)
        jvm = spark._jvm
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()
        self._path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._path(uri).getFileSystem(self._conf)
        rename = getattr(jvm.org.apache.hadoop.fs, "Options$Rename")
        self._no_overwrite = spark.sparkContext._gateway.new_array(rename, 1)
        self._no_overwrite[0] = rename.NONE
        self._context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(
            self._path(uri).toUri(), self._conf
        )

    def needs_probe(self) -> bool:
        # executors write where the driver looks unless the file system is local to a
        # driver that runs its own executors
        master = str(self.spark.sparkContext.master)
        return self.local is not None and not master.startswith("local")

    def exists(self, uri: str) -> bool:
        return bool(self._fs.exists(self._path(uri)))

    def is_dir(self, uri: str) -> bool:
        path = self._path(uri)
        return bool(self._fs.exists(path) and self._fs.getFileStatus(path).isDirectory())

    def read_text(self, uri: str) -> str:
        # listed by the driver, read by an executor
        return "\n".join(row[0] for row in self.spark.read.text(uri).collect())

    def write_bytes(self, uri: str, data: bytes) -> None:
        out = self._fs.create(self._path(uri), False)
        try:
            out.write(bytearray(data))
            try:
                out.hsync()  # on the disks (HDFS: every replica's)
            except Exception:  # a stream without hsync: flushed, and closed below
                out.flush()
        finally:
            out.close()

    def rename(self, src: str, dst: str) -> None:
        self._context.rename(self._path(src), self._path(dst), self._no_overwrite)
        if self.local is not None:
            _sync_dir(self.local.parent)

    def remove(self, uri: str) -> None:
        self._fs.delete(self._path(uri), True)


class ClientSite(Site):
    """A Spark Connect session: Spark writes on the server's side, and this process publishes
    on its own file system, which must be the same (checked by the probe)."""

    def _here(self, uri: str) -> Path:
        path = _file_path(uri)
        assert path is not None  # ClientSite is made for local destinations only
        return path

    def exists(self, uri: str) -> bool:
        path = self._here(uri)
        return path.exists() or path.is_symlink()

    def is_dir(self, uri: str) -> bool:
        return self._here(uri).is_dir()

    def read_text(self, uri: str) -> str:
        parts = sorted(self._here(uri).glob("part-*"))
        return "\n".join(p.read_text(encoding="utf-8") for p in parts)

    def write_bytes(self, uri: str, data: bytes) -> None:
        path = self._here(uri)
        with open(path, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _sync_dir(path.parent)

    def rename(self, src: str, dst: str) -> None:
        target = self._here(dst)
        if target.exists() or target.is_symlink():
            raise OSError(errno.EEXIST, "the destination appeared meanwhile")
        os.rename(self._here(src), target)
        _sync_dir(target.parent)

    def remove(self, uri: str) -> None:
        path = self._here(uri)
        if path.exists():
            shutil.rmtree(path)


def site_of(spark: Any, output: str | os.PathLike[str]) -> Site:
    """The :class:`Site` of a Parquet destination for ``spark``, or a typed error saying why
    Spark cannot publish there safely (module notes)."""
    shown = os.fspath(output)
    scheme = uri_scheme(output)
    uri = shown if scheme is not None else local_uri(shown)
    local = _file_path(uri)
    if local is not None:
        kind = mount_type(local.parent)
        if kind is not None and (kind == "fuse" or kind.startswith("fuse.")):
            raise ValidationError(
                "output",
                _FN,
                "a path on a file system with atomic directory rename: "
                f"{local.parent} is on a FUSE mount ({kind}); over object storage (Databricks "
                "/Volumes and /dbfs, s3fs, gcsfuse) it renames a directory file by file, so a "
                "reader could see part of a release",
                shown,
            )
    if is_connect(spark):
        if local is None:
            raise ValidationError(
                "output",
                f"{_FN} through Spark Connect",
                "a plain path or a file: URI on a file system this process shares with the "
                "Spark Connect server (this process publishes the dataset by one rename, and "
                f"Spark Connect gives it no access to {scheme or 'this'} file systems); write "
                "CSV or JSON here, or use a classic session on the cluster",
                shown,
            )
        return ClientSite(spark, shown, uri, local)
    scheme = scheme or "file"
    if scheme not in ATOMIC_RENAME:
        raise ValidationError(
            "output",
            _FN,
            "a path on a file system with atomic directory rename "
            f"({', '.join(sorted(ATOMIC_RENAME))}): {scheme} renames a directory file by "
            "file, so a reader could see part of a release",
            shown,
        )
    try:
        return DriverSite(spark, shown, uri, local)
    except Exception as exc:  # no Hadoop file system for the scheme, a bad URI
        raise ValidationError(
            "output", _FN, f"a path on a file system Spark can write ({_first_line(exc)})", shown
        ) from None


#: the mount table read by :func:`mount_type`
MOUNTS: Final[str] = "/proc/self/mounts"


def mount_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the file system mounted where ``path`` is (the longest mount point that
    holds it, in the mount table ``mounts``; by default this machine's, :data:`MOUNTS`), None
    where unknown (no mount table: not Linux).

    >>> table = "/dev/sda1 / ext4 rw 0 0\\nfs /Volumes fuse rw 0 0\\n"
    >>> mount_type(Path("/Volumes/main/r"), table), mount_type(Path("/Volumes2/r"), table)
    ('fuse', 'ext4')
    """
    if mounts is None:
        try:
            mounts = Path(MOUNTS).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target = os.path.realpath(path)
    best, kind = -1, None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        # the table writes a space, a tab, a newline and a backslash as octal escapes
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), fields[2]
    return kind


def _file_path(uri: str) -> Path | None:
    """The path on this machine of a ``file:`` URI (None for other file systems), read as
    Hadoop reads it: the characters as they are (no query, fragment or percent-decoding).

    >>> _file_path("file:/a/b#c"), _file_path("file:///a"), _file_path("file://host/a")
    (PosixPath('/a/b#c'), PosixPath('/a'), None)
    """
    if uri_scheme(uri) != "file":
        return None
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            return None
        rest = slash + path
    return Path(rest)


def _first_line(exc: BaseException) -> str:
    """The first line of an error's message; for an error raised in Spark's JVM, the Java
    exception's own line."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def _sync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
