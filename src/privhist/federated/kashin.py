"""Kashin's representation over tight frames (the paper, Section 3.1 and Appendix B).

A tight (Parseval) frame is a ``d x D`` matrix ``U`` with orthonormal rows (``U U^T = I_d``), so
``||U^T x||_2 = ||x||_2`` and ``x = U (U^T x)``. Kashin's representation of ``x`` at level ``K``
(Definition 3) is a ``y`` in ``R^D`` with ``x = U y`` and ``max_k |y[k]| <= K / sqrt(D) ||x||_2``.

Frames:

* :class:`OrthogonalFrame`: the paper's construction (Appendix B): the first ``d`` rows of a
  Haar-random ``D x D`` orthogonal matrix (QR of a Gaussian matrix with the signs of ``R``'s
  diagonal fixed). Dense: ``O(d D)`` per vector.
* :class:`HadamardFrame`: ``d`` randomly chosen rows of ``H_D diag(s) / sqrt(D)`` (``H_D`` the
  Sylvester-Hadamard matrix, ``s`` random signs, ``D`` a power of two). Applying ``U`` or ``U^T``
  costs one fast Walsh-Hadamard transform, ``O(D log D)``, here done for many users at once
  as Kronecker factors of size at most 128 (each a matrix product).

The Lyubarskii-Vershynin iteration (:func:`kashin_representation`, Appendix B; Lyubarskii and
Vershynin 2010, Section 3): ``a <- 0``, ``M <- ||x|| / sqrt(nu D)``; ``r`` times:
``b <- U^T x``, truncate ``b`` at ``+-M``, ``x <- x - U b``, ``a <- a + b``, ``M <- eta M``;
a vector whose ``b`` needs no truncation is then represented exactly (``U U^T = I``) and leaves.
The implementation runs the same iteration on the truncation excess through the Gram
matrix ``G = U^T U`` (:func:`_lv_block`), on ``W = U diag(s)`` in units of each vector's
``M_0``: dense steps while the excess is dense (two transforms each), then the sparse excess,
whose next truncations are confined to its support whenever ``gamma ||e||_1`` (``gamma`` the
largest off-diagonal ``|G|``) stays below the next limit, so ``G e`` is formed once at the end.
For Zipf users at ``D = 2 d``: five transforms and one sparse product per vector, in blocks of
:data:`KASHIN_BLOCK` vectors spread over :data:`KASHIN_THREADS` threads.
The coefficients never exceed ``M (1 + eta + eta**2 + ...) < K ||x|| / sqrt(D)`` with
``K = 1 / ((1 - eta) sqrt(nu))`` whatever the frame, so the ``l_inf`` bound holds by
construction; the residual ``||x - U a||`` is at most ``eta**r ||x||`` when the frame satisfies
the uncertainty principle with ``(eta, nu)``. (Appendix B writes ``a <- a + sqrt(D) b``, the
convention of frames with unit-norm vectors; with a Parseval frame the update is ``a <- a + b``,
which gives Definition 3's bound exactly.)

Randomness for the frames comes from a :class:`~privhist.core.random.RandomSource` (the frame is
public and data-independent; floats are fine here).
"""

from __future__ import annotations

import functools
import math
import os
import threading
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_positive_int

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: default uncertainty-principle parameters (checked empirically for D >= 2 d in the tests)
DEFAULT_ETA = 0.5
DEFAULT_NU = 0.5
DEFAULT_ITERATIONS = 8


def uniform01(rng: RandomSource, size: int) -> F64:
    """``size`` uniform floats in [0, 1) (53 random bits each) for simulations."""
    words = rng.uint64(size)
    return np.asarray((words >> np.uint64(11)).astype(np.float64) * 2.0**-53)


def standard_normal(rng: RandomSource, size: int) -> F64:
    """``size`` standard normal floats by the Box-Muller transform (simulations only)."""
    half = (size + 1) // 2
    u1 = 1.0 - uniform01(rng, half)  # (0, 1]
    u2 = uniform01(rng, half)
    r = np.sqrt(-2.0 * np.log(u1))
    z = np.concatenate([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)])
    return np.asarray(z[:size])


class TightFrame(ABC):
    """A ``d x D`` Parseval frame ``U``: :meth:`analyze` is ``U^T``, :meth:`synthesize` is ``U``."""

    d: int
    D: int

    @abstractmethod
    def analyze(self, x: F64) -> F64:
        """``U^T x`` for each row of ``x`` (shape ``(n, d)`` -> ``(n, D)``)."""

    @abstractmethod
    def synthesize(self, y: F64) -> F64:
        """``U y`` for each row of ``y`` (shape ``(n, D)`` -> ``(n, d)``): the decoder."""

    def matrix(self) -> F64:
        """``U`` as a dense ``d x D`` array."""
        return self.synthesize(np.eye(self.D)).T.copy()

    def gram_apply(self, e: F64) -> F64:
        """``G e = U^T (U e)`` for each row of ``e`` (shape ``(n, D)``)."""
        return self.analyze(self.synthesize(e))

    def analyze_into(self, x: F64, out: F64) -> None:
        """``out[...] = U^T x`` (``out`` C-contiguous, not overlapping ``x``)."""
        out[...] = self.analyze(x)

    def gram_apply_into(self, e: F64, out: F64) -> None:
        """``out[...] = G e`` (``out`` C-contiguous, not overlapping ``e``)."""
        out[...] = self.gram_apply(e)

    def gram(self) -> F64:
        """``G = U^T U`` (``D x D``, the orthogonal projection onto the row space of ``U``).

        Computed once and cached (read-only); :func:`kashin_representation` multiplies it by
        sparse vectors. Memory ``8 D**2`` bytes (32 MB at ``D = 2048``).
        """
        cached: F64 | None = getattr(self, "_gram", None)
        if cached is None:
            with _GRAM_LOCK:
                cached = getattr(self, "_gram", None)
                if cached is None:
                    cached = self._form_gram()
                    cached.setflags(write=False)
                    self._gram = cached
        return cached

    def _form_gram(self) -> F64:
        u = self.matrix()
        return np.ascontiguousarray(u.T @ u)

    # The iteration (:func:`_lv_block`) runs on the frame ``W = U diag(s)`` for a public sign
    # vector ``s`` (``W`` is again a Parseval frame; its representation of ``x`` is ``s`` times
    # that of ``U``, since truncation commutes with sign flips). A frame that stores ``s``
    # separately (:class:`HadamardFrame`) saves the sign multiplications of every transform.

    def _kernel_signs(self) -> F64 | None:
        """``s`` (``None``: all ones, ``W = U``)."""
        return None

    def _kernel_analyze_into(self, x: F64, scale: F64, out: F64) -> None:
        """``out[i] = W^T x[i] * scale[i]`` (``out`` not overlapping the thread's scratch)."""
        self.analyze_into(x * scale[:, None], out)

    def _kernel_gram_into(self, e: F64, out: F64, spare: F64) -> None:
        """``out = W^T W e`` row by row; ``spare`` is free scratch of ``e``'s shape."""
        self.gram_apply_into(e, out)

    def _kernel_gram(self) -> F64:
        """``W^T W`` as a dense ``D x D`` array (cached, read-only)."""
        return self.gram()

    def _kernel_offdiag(self) -> float:
        """``gamma = max_{k != l} |(W^T W)[k, l]|`` (cached)."""
        cached: float | None = getattr(self, "_offdiag", None)
        if cached is None:
            g = self._kernel_gram()
            cached = float(np.max(np.abs(g - np.diag(np.diag(g))))) if self.D > 1 else 0.0
            self._offdiag = cached
        return cached


def _check_dims(d: Any, D: Any, function: str) -> tuple[int, int]:
    dd = check_positive_int(d, function, "d")
    big = check_positive_int(D, function, "D")
    if big < dd:
        raise ValidationError("D", function, f"an integer >= d = {dd}", D)
    return dd, big


class OrthogonalFrame(TightFrame):
    """The first ``d`` rows of a Haar-random ``D x D`` orthogonal matrix (Appendix B).

    >>> from privhist.core.random import SeededRandom
    >>> f = OrthogonalFrame(3, 8, SeededRandom(0))
    >>> bool(np.allclose(f.matrix() @ f.matrix().T, np.eye(3)))
    True
    """

    def __init__(self, d: int, D: int, rng: RandomSource) -> None:
        self.d, self.D = _check_dims(d, D, "OrthogonalFrame")
        g = standard_normal(rng, self.D * self.D).reshape(self.D, self.D)
        q, r = np.linalg.qr(g)
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        self.U: F64 = np.ascontiguousarray(q[: self.d])

    def analyze(self, x: F64) -> F64:
        return np.asarray(np.asarray(x, dtype=np.float64) @ self.U)

    def synthesize(self, y: F64) -> F64:
        return np.asarray(np.asarray(y, dtype=np.float64) @ self.U.T)


@functools.cache
def _hadamard(k: int) -> F64:
    """The Sylvester-Hadamard matrix of size ``2**k`` (cached; read-only)."""
    h = np.ones((1, 1))
    for _ in range(k):
        h = np.block([[h, h], [h, -h]])
    h.setflags(write=False)
    return h


#: rows transformed per block by :func:`walsh_hadamard_rows` (keeps the temporaries in the L2/L3
#: caches)
FWHT_BLOCK = 64
#: largest Kronecker factor of the fast transform, as a power of two
_MAX_FACTOR_BITS = 7


def _factor_bits(big: int, function: str) -> list[int]:
    k = big.bit_length() - 1
    if big != 1 << k:
        raise ValidationError("x", function, "rows whose length is a power of two", big)
    j = max(1, -(-k // _MAX_FACTOR_BITS))  # fewest factors of at most 2**7, near-equal sizes
    return [k // j + (1 if i < k % j else 0) for i in range(j)]


def _fwht_into(t: F64, parts: list[int], out: F64, tmp: F64) -> None:
    """``out = H_D t`` row by row; ``tmp`` is scratch of the same shape (no overlaps)."""
    n = t.shape[0]
    # the row as a tensor of shape (2^p1, ..., 2^pj): the last factor multiplies each row's
    # (rest x 2^pj) matrix from the right, factor i the (2^pi x rest) matrices from the left.
    # One product per row keeps every BLAS call small (single-threaded), so blocks can run on
    # several threads without oversubscribing the cores. Products alternate between ``tmp``
    # and ``out`` so that the last one lands in ``out``.
    targets = [out if (len(parts) - 1 - i) % 2 == 0 else tmp for i in range(len(parts))]
    last = 1 << parts[-1]
    src = t
    inner = 1
    for i, p in enumerate(reversed(parts)):
        size = 1 << p
        dst = targets[i]
        if i == 0:
            np.matmul(src.reshape(n, -1, size), _hadamard(p), out=dst.reshape(n, -1, size))
            inner = last
        else:
            shape = (-1, size, inner)
            np.matmul(_hadamard(p), src.reshape(shape), out=dst.reshape(shape))
            inner *= size
        src = dst


def walsh_hadamard_rows(x: F64) -> F64:
    """Unnormalised Walsh-Hadamard transform ``H_D`` of every row (``D`` a power of two).

    ``H_D`` is the Kronecker product of Sylvester-Hadamard matrices of sizes ``2**k_i``
    (``k_i <= 7``, at most two factors up to ``D = 2**14``). With the row viewed as a matrix
    (or tensor) of those shapes, each factor is one matrix product from the left or the right,
    without transposes; rows are processed in blocks of :data:`FWHT_BLOCK`.

    >>> walsh_hadamard_rows(np.array([[1.0, 0, 0, 0]])).tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    """
    arr = np.ascontiguousarray(x, dtype=np.float64)
    n, big = arr.shape
    parts = _factor_bits(big, "walsh_hadamard_rows")
    if big == 1:
        return arr.copy()
    out = np.empty((n, big))
    tmp = _scratch(min(n, FWHT_BLOCK), big).tmp
    for start in range(0, n, FWHT_BLOCK):
        stop = min(n, start + FWHT_BLOCK)
        _fwht_into(arr[start:stop], parts, out[start:stop], tmp[: stop - start])
    return out


class _Scratch:
    """Reusable work arrays of one thread (fresh large arrays cost page faults each time)."""

    def __init__(self, rows: int, big: int) -> None:
        self.rows, self.big = rows, big
        self.tmp = np.empty((rows, big))
        self.a = np.empty((rows, big))
        self.b = np.empty((rows, big))
        self.c = np.empty((rows, big))
        self.mask = np.empty((rows, big), dtype=np.bool_)


_LOCAL = threading.local()
_GRAM_LOCK = threading.RLock()


def _scratch(rows: int, big: int) -> _Scratch:
    """The calling thread's :class:`_Scratch` with at least ``rows`` rows of length ``big``."""
    cur: _Scratch | None = getattr(_LOCAL, "scratch", None)
    if cur is None or cur.big != big or cur.rows < rows:
        cur = _Scratch(max(rows, FWHT_BLOCK), big)
        _LOCAL.scratch = cur
    return cur


class HadamardFrame(TightFrame):
    """``d`` random rows of ``H_D diag(s) / sqrt(D)`` (``D`` a power of two >= d).

    ``U^T x = diag(s) H_D (E x) / sqrt(D)`` where ``E`` places ``x`` on the chosen rows, and
    ``U y = (H_D (s * y))[rows] / sqrt(D)``: one fast transform each.

    >>> from privhist.core.random import SeededRandom
    >>> f = HadamardFrame(5, 8, SeededRandom(1))
    >>> bool(np.allclose(f.matrix() @ f.matrix().T, np.eye(5)))
    True
    """

    def __init__(self, d: int, D: int, rng: RandomSource) -> None:
        self.d, self.D = _check_dims(d, D, "HadamardFrame")
        if self.D & (self.D - 1):
            raise ValidationError("D", "HadamardFrame", "a power of two", D)
        self.signs: F64 = np.where(rng.bits(self.D), 1.0, -1.0)
        order = np.argsort(uniform01(rng, self.D), kind="stable")
        self.rows = np.sort(order[: self.d])
        self._scale = 1.0 / math.sqrt(self.D)
        self._row_mask = np.zeros(self.D)
        self._row_mask[self.rows] = 1.0
        self._parts = _factor_bits(self.D, "HadamardFrame")
        self._analyze_scale = self.signs * self._scale
        self._gram_scale = self.signs / self.D
        self._row_mask_d = self._row_mask / self.D

    def analyze(self, x: F64) -> F64:
        arr = np.asarray(x, dtype=np.float64)
        out = np.empty((arr.shape[0], self.D))
        for start in range(0, arr.shape[0], FWHT_BLOCK):
            stop = min(arr.shape[0], start + FWHT_BLOCK)
            self.analyze_into(arr[start:stop], out[start:stop])
        return out

    def analyze_into(self, x: F64, out: F64) -> None:
        n = x.shape[0]
        if n > FWHT_BLOCK:
            out[...] = self.analyze(x)
            return
        ws = _scratch(n, self.D)
        full = ws.a[:n]
        full.fill(0.0)
        full[:, self.rows] = x
        _fwht_into(full, self._parts, out, ws.tmp[:n])
        out *= self._analyze_scale

    def synthesize(self, y: F64) -> F64:
        arr = np.asarray(y, dtype=np.float64)
        return np.asarray(walsh_hadamard_rows(arr * self.signs)[:, self.rows] * self._scale)

    def gram_apply(self, e: F64) -> F64:
        """``G e = diag(s) H_D P H_D diag(s) e / D`` (``P`` keeps the chosen rows): two
        transforms, no gather or scatter."""
        arr = np.asarray(e, dtype=np.float64)
        out = np.empty((arr.shape[0], self.D))
        for start in range(0, arr.shape[0], FWHT_BLOCK):
            stop = min(arr.shape[0], start + FWHT_BLOCK)
            self.gram_apply_into(arr[start:stop], out[start:stop])
        return out

    def gram_apply_into(self, e: F64, out: F64) -> None:
        n = e.shape[0]
        if n > FWHT_BLOCK:
            out[...] = self.gram_apply(e)
            return
        ws = _scratch(n, self.D)
        staged = ws.a[:n]
        mid = ws.b[:n] if np.may_share_memory(out, ws.c) else ws.c[:n]  # e is staged first
        np.multiply(e, self.signs, out=staged)
        _fwht_into(staged, self._parts, mid, ws.tmp[:n])
        mid *= self._row_mask
        _fwht_into(mid, self._parts, out, ws.tmp[:n])
        out *= self._gram_scale

    def _form_gram(self) -> F64:
        """``G = U^T U = diag(s) G_W diag(s)`` (see :meth:`_kernel_gram`)."""
        return np.ascontiguousarray(np.multiply.outer(self.signs, self.signs) * self._kernel_gram())

    # The iteration runs on ``W = U diag(s) = P H_D / sqrt(D)`` (``P`` keeps the chosen rows):
    # ``W^T x = H_D (E x) / sqrt(D)`` and ``W^T W e = H_D P H_D e / D``, one and two transforms
    # without sign multiplications; the scales ride on the scatter and on the row mask.

    def _kernel_signs(self) -> F64 | None:
        return self.signs

    def _kernel_analyze_into(self, x: F64, scale: F64, out: F64) -> None:
        n = x.shape[0]
        ws = _scratch(n, self.D)
        full = ws.a[:n]
        full.fill(0.0)
        factor = scale * self._scale
        nz = np.flatnonzero(x != 0)  # a boolean mask's nonzeros are found fastest
        if 4 * nz.size < x.size:  # count vectors are sparse: scatter only their items
            at, item = np.divmod(nz, self.d)
            full[at, self.rows[item]] = x.ravel()[nz] * factor[at]
        else:
            full[:, self.rows] = x * factor[:, None]
        _fwht_into(full, self._parts, out, ws.tmp[:n])

    def _kernel_gram_into(self, e: F64, out: F64, spare: F64) -> None:
        tmp = _scratch(e.shape[0], self.D).tmp[: e.shape[0]]
        _fwht_into(e, self._parts, spare, tmp)
        spare *= self._row_mask_d
        _fwht_into(spare, self._parts, out, tmp)

    def _kernel_offdiag(self) -> float:
        """``gamma = max_{l != 0} |g[l]| / D`` (every off-diagonal entry is one of these)."""
        return float(np.abs(self._kernel_gram()[0, 1:]).max()) if self.D > 1 else 0.0

    def _kernel_gram(self) -> F64:
        """``G_W = H_D P H_D / D`` from one transform: ``G_W[k, l] = g[k XOR l] / D``.

        ``(H_D P H_D)[k, l] = sum_{i in rows} H[i, k] H[i, l] = sum_{i in rows} H[i, k XOR l]``
        (Sylvester-Hadamard entries are ``(-1)**popcount(i & k)``), so ``g = H_D 1_rows``.
        Formed on first use, once, under a lock (``8 D**2`` bytes).
        """
        cached: F64 | None = getattr(self, "_gram_w", None)
        if cached is None:
            with _GRAM_LOCK:
                cached = getattr(self, "_gram_w", None)
                if cached is None:
                    indicator = np.zeros((1, self.D))
                    indicator[0, self.rows] = 1.0
                    g = walsh_hadamard_rows(indicator)[0] / self.D
                    pos = np.arange(self.D)
                    cached = np.ascontiguousarray(g[pos[:, None] ^ pos[None, :]])
                    cached.setflags(write=False)
                    self._gram_w = cached
        return cached


#: the largest ``d`` for which ``frame_for(d, rng)`` builds the dense orthogonal frame
ORTHOGONAL_UP_TO = 128


def frame_for(d: int, rng: RandomSource, kind: str = "auto") -> TightFrame:
    """The tight frame for ``d`` items: ``"orthogonal"`` (the paper's, ``D = 2d``),
    ``"hadamard"`` (randomised Hadamard, ``D`` the smallest power of two ``>= 2d``) or
    ``"auto"``: orthogonal up to ``d =`` :data:`ORTHOGONAL_UP_TO`, Hadamard above (the dense
    frame costs ``O(d D)`` per vector).

    >>> from privhist.core.random import SeededRandom
    >>> [(f.d, f.D) for f in (frame_for(50, SeededRandom(0)), frame_for(1000, SeededRandom(0)))]
    [(50, 100), (1000, 2048)]
    """
    if kind not in ("auto", "orthogonal", "hadamard"):
        raise ValidationError("frame", "frame_for", "auto, orthogonal or hadamard", kind)
    if kind == "orthogonal" or (kind == "auto" and d <= ORTHOGONAL_UP_TO):
        return OrthogonalFrame(d, 2 * d, rng)
    return HadamardFrame(d, 1 << (2 * d - 1).bit_length(), rng)


def kashin_level(eta: float, nu: float) -> float:
    """``K = 1 / ((1 - eta) sqrt(nu))`` (Appendix B)."""
    return 1.0 / ((1.0 - eta) * math.sqrt(nu))


@dataclass(frozen=True)
class KashinResult:
    """Coefficients ``y`` (``(n, D)``), the residual norms ``||x - U y||`` and the level ``K``."""

    coefficients: F64
    residual: F64
    level: float


def kashin_representation(
    frame: TightFrame,
    x: Any,
    *,
    eta: float = DEFAULT_ETA,
    nu: float = DEFAULT_NU,
    iterations: int = DEFAULT_ITERATIONS,
) -> KashinResult:
    """Lyubarskii-Vershynin iteration for every row of ``x`` (Appendix B).

    Args:
        frame: The tight frame.
        x: Vectors, shape ``(n, d)``.
        eta: Contraction parameter in (0, 1).
        nu: Uncertainty-principle fraction in (0, 1].
        iterations: ``r``, at least 1.

    Returns:
        A :class:`KashinResult`; ``max |y| <= K ||x|| / sqrt(D)`` always holds.

    >>> from privhist.core.random import SeededRandom
    >>> f = HadamardFrame(50, 128, SeededRandom(0))
    >>> x = np.zeros((1, 50)); x[0, 0] = 10.0
    >>> r = kashin_representation(f, x)
    >>> bool(np.abs(r.coefficients).max() <= r.level * 10 / np.sqrt(128)), bool(r.residual[0] < 1)
    (True, True)
    """
    fn = "kashin_representation"
    if not 0 < float(eta) < 1:
        raise ValidationError("eta", fn, "in (0, 1)", eta)
    if not 0 < float(nu) <= 1:
        raise ValidationError("nu", fn, "in (0, 1]", nu)
    r = check_positive_int(iterations, fn, "iterations")
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != frame.d:
        raise ValidationError("x", fn, f"an array of shape (n, {frame.d})", arr.shape)
    if not np.isfinite(arr).all():
        raise ValidationError("x", fn, "finite numbers", "NaN or infinity")
    n = arr.shape[0]
    coeffs = np.empty((n, frame.D))
    residual = np.zeros(n)
    use_gram = frame.D <= GRAM_MAX_D  # G is formed on first use (once, under a lock)

    def block(start: int) -> None:
        stop = min(n, start + KASHIN_BLOCK)
        residual[start:stop] = _lv_block(
            frame, arr[start:stop], coeffs[start:stop], eta, nu, r, use_gram
        )

    starts = range(0, n, KASHIN_BLOCK)
    if KASHIN_THREADS > 1 and len(starts) > 1:
        # blocks write disjoint rows, so the result does not depend on the schedule
        with ThreadPoolExecutor(max_workers=KASHIN_THREADS) as pool:
            list(pool.map(block, starts))
    else:
        for start in starts:
            block(start)
    return KashinResult(coeffs, residual, kashin_level(eta, nu))


#: vectors per block of the iteration (a block's working arrays stay in the caches)
KASHIN_BLOCK = 64
#: threads working on blocks (NumPy, BLAS and scipy's sparse products release the GIL)
KASHIN_THREADS = max(1, min(4, os.cpu_count() or 1))
#: ``G e`` is a sparse product while ``e`` has at most this many nonzeros per vector on average
#: (scipy's sparse-times-dense product costs about as much as two fast transforms at ~12-16
#: nonzeros when ``D = 2048``)
SPARSE_PER_ROW = 12
#: largest ``D`` for which the ``D x D`` Gram matrix is formed and used
GRAM_MAX_D = 4096
#: a sparse excess ``e`` with ``gamma ||e||_1 <= SCREEN_FRACTION * M`` (``gamma`` the largest
#: off-diagonal ``|G|``) cannot make a coordinate off its support exceed the next limit ``M``;
#: the margin below 1 keeps the certificate valid under rounding (0 turns screening off)
SCREEN_FRACTION = 1.0 - 1e-9


def _lv_block(
    frame: TightFrame, x: F64, coeffs: F64, eta: float, nu: float, r: int, use_gram: bool
) -> F64:
    """The iteration on one block of rows; writes ``coeffs`` and returns the residual norms.

    Iteration ``t`` truncates ``f_t = U^T x_t`` (``x_t`` the residual) at ``+-M_t``:
    ``b_t = clip(f_t, -M_t, M_t)``, excess ``e_t = f_t - b_t``. Since ``U U^T = I``,
    ``x_{t+1} = x_t - U b_t = U e_t`` and ``f_{t+1} = U^T U e_t = G e_t``; a vector with
    ``e_t = 0`` is represented exactly and leaves. The residual norm after the last step is
    ``||x_r|| = ||U e_{r-1}||``.

    Work is done on ``W = U diag(s)`` (:meth:`TightFrame._kernel_signs`) and in units of each
    row's ``M_0``, so the limits are the scalars ``eta**t`` (the map is positively homogeneous
    and truncation commutes with sign flips); the last pass multiplies by ``M_0 s``. While the
    excess is dense (for Zipf users at ``D = 2 d``: ~300, ~20 and ~3 truncated coordinates per
    vector in steps 0, 1 and 2) ``G e_t`` costs two transforms; once it has at most
    :data:`SPARSE_PER_ROW` entries per vector on average it is kept as sparse entries. Off the
    support of ``e_t``, ``|f_{t+1}[k]| <= gamma ||e_t||_1``; when that is below ``M_{t+1}``
    (times :data:`SCREEN_FRACTION`) only the support can be truncated, so ``f_{t+1}`` is
    computed there alone, ``-e_{t+1}`` is added now and ``G e_t`` once for all such steps at
    the end (``b_{t+1} = G e_t - e_{t+1}``); other vectors take a sparse product. Truncated
    coordinates are found through the boolean mask ``f_t != b_t`` (counting and locating the
    nonzeros of a boolean array is several times cheaper than of a float array).
    """
    n, big = x.shape[0], frame.D
    ws = _scratch(n, big)
    level = np.linalg.norm(x, axis=1) / math.sqrt(nu * big)  # M_0 of each row
    inv = np.divide(1.0, level, out=np.zeros(n), where=level > 0)
    bufs = (ws.a[:n], ws.b[:n], ws.c[:n])
    f = bufs[2]
    frame._kernel_analyze_into(x, inv, f)  # f_0 / M_0 (uses ws.a and ws.tmp)
    np.clip(f, -1.0, 1.0, out=coeffs)  # b_0
    b = coeffs
    lim = 1.0
    hit = ws.mask[:n]
    rows: I64 | None = None  # the excess as (row, column, value), row-major, once sparse
    cols = np.empty(0, dtype=np.int64)
    values = np.empty(0)
    inputs: list[tuple[I64, I64, F64]] = []  # screened e_{t-1}, whose G e_{t-1} is added last
    for _ in range(1, r):
        if rows is None:
            np.not_equal(f, b, out=hit)
            nnz = int(np.count_nonzero(hit))
            if nnz and (not use_gram or nnz > SPARSE_PER_ROW * n):
                f -= b  # e_t
                out, spare = (buf for buf in bufs if buf is not f)
                lim *= eta
                frame._kernel_gram_into(f, out, spare)  # f_{t+1} / M_0
                np.clip(out, -lim, lim, out=spare)  # b_{t+1}
                coeffs += spare
                f, b = out, spare
                continue
            rows, cols, values = _excess(f, b, hit)
        if rows.size == 0:
            break
        lim *= eta
        gram = frame._kernel_gram()
        l1 = np.bincount(rows, weights=np.abs(values), minlength=n)
        screened = (frame._kernel_offdiag() * l1 <= SCREEN_FRACTION * lim)[rows]
        parts: list[tuple[I64, I64, F64]] = []
        if screened.any():
            # |f_t[k]| <= gamma ||e_{t-1}||_1 < M_t off the support of e_{t-1}: only the
            # support can be truncated, and b_t = G e_{t-1} - e_t there and elsewhere
            rs, cs, vs = rows[screened], cols[screened], values[screened]
            inputs.append((rs, cs, vs))
            fs = _gram_on_support(gram, rs, cs, vs, n)
            es = fs - np.clip(fs, -lim, lim)
            keep = es != 0
            rs, cs, es = rs[keep], cs[keep], es[keep]
            coeffs[rs, cs] -= es
            parts.append((rs, cs, es))
        if not screened.all():
            other = ~screened
            touched, full = _sparse_gram(gram, rows[other], cols[other], values[other], n)
            bt = np.clip(full, -lim, lim, out=ws.a[: touched.size])
            if touched.size == n:
                coeffs += bt
            else:
                coeffs[touched] += bt
            ru, cu, eu = _excess(full, bt, ws.mask[: touched.size])
            parts.append((touched[ru], cu, eu))
        rows, cols, values = _concat_rows(parts)
    if rows is None:
        rows, cols, values = _excess(f, b, hit)
    if inputs:
        touched, full = _sparse_gram(frame._kernel_gram(), *_concat_rows(inputs), n)
        if touched.size == n:
            coeffs += full
        else:
            coeffs[touched] += full
    # vectors with an excess left after r steps: residual ||U e_{r-1}|| = ||W e_{r-1}|| M_0
    residual = np.zeros(n)
    if rows.size:
        counts = np.bincount(rows, minlength=n)
        left = np.flatnonzero(counts)
        last = np.zeros((left.size, big))
        last[np.repeat(np.arange(left.size), counts[left]), cols] = values
        signs = frame._kernel_signs()
        if signs is not None:
            last *= signs
        residual[left] = np.linalg.norm(frame.synthesize(last), axis=1) * level[left]
    return _finish(frame, coeffs, level, residual)


def _concat_rows(parts: list[tuple[I64, I64, F64]]) -> tuple[I64, I64, F64]:
    """Sparse entries of several row-major parts, merged in row order (stable)."""
    if len(parts) == 1:
        return parts[0]
    rows = np.concatenate([p[0] for p in parts])
    order = np.argsort(rows, kind="stable")
    cols = np.concatenate([p[1] for p in parts])
    values = np.concatenate([p[2] for p in parts])
    return rows[order], cols[order], values[order]


def _sparse_gram(gram: F64, rows: I64, cols: I64, values: F64, n: int) -> tuple[I64, F64]:
    """The rows that have entries (sorted) and ``G e`` for each of them (``rows`` sorted)."""
    from scipy import sparse  # here: scipy is slow to import

    counts = np.bincount(rows, minlength=n)
    touched = np.flatnonzero(counts)
    indptr = np.zeros(touched.size + 1, dtype=np.int64)
    np.cumsum(counts[touched], out=indptr[1:])
    e = sparse.csr_matrix((values, cols, indptr), shape=(touched.size, gram.shape[0]))
    return touched, np.asarray(e @ gram)


def _gram_on_support(gram: F64, rows: I64, cols: I64, values: F64, n: int) -> F64:
    """``(G e)[k]`` at every entry ``(row, k)`` of the sparse ``e`` (``rows`` sorted): a sum
    over the entries of the same row."""
    counts = np.bincount(rows, minlength=n)
    starts = np.cumsum(counts) - counts
    per = counts[rows]
    left = np.repeat(np.arange(rows.size), per)
    right = (
        np.repeat(starts[rows], per) + np.arange(left.size) - np.repeat(np.cumsum(per) - per, per)
    )
    terms = gram[cols[left], cols[right]] * values[right]
    return np.asarray(np.bincount(left, weights=terms, minlength=rows.size), dtype=np.float64)


def _excess(f: F64, b: F64, hit: npt.NDArray[np.bool_]) -> tuple[I64, I64, F64]:
    """The coordinates where ``f != b`` (row-major order) and ``f - b`` there."""
    np.not_equal(f, b, out=hit)
    flat = np.flatnonzero(hit)
    rows, cols = np.divmod(flat, f.shape[1])
    return rows, cols, f.ravel()[flat] - b.ravel()[flat]


def _finish(frame: TightFrame, coeffs: F64, level: F64, residual: F64) -> F64:
    """Back from ``W`` and units of ``M_0``: ``coeffs *= M_0 s``; returns ``residual``."""
    coeffs *= level[:, None]
    signs = frame._kernel_signs()
    if signs is not None:
        coeffs *= signs
    return residual
