"""The validity circuits of the Prio3 variants, draft-irtf-cfrg-vdaf-20, Section 7.4.

* :class:`Count` (7.4.1): ``x * x - x`` with one :class:`~privhist.federated.vdaf.flp.Mul`.
* :class:`Sum` (7.4.2): ``bits`` range checks ``b**2 - b`` with
  :class:`~privhist.federated.vdaf.flp.PolyEval`, on the weighted bit encoding whose weights are
  ``1, 2, ..., 2**(bits-2)`` and ``max_measurement - (2**(bits-1) - 1)``.
* :class:`SumVec` (7.4.3), :class:`Histogram` (7.4.4), :class:`MultihotCountVec` (7.4.5):
  a random linear combination of range checks ``r**(j+1) x_j * (x_j - 1)`` through
  ``ParallelSum(Mul, chunk_length)``, one joint-randomness element ``r`` per gadget call, plus
  (Histogram) ``sum(x) - 1`` or (MultihotCountVec) ``sum(x) - decoded weight``.

Constants added in a circuit are scaled by ``1 / num_shares`` so that the circuit on additive
shares gives additive shares of its output. Each ``eval`` computes every gadget call at once
(module notes of :mod:`privhist.federated.vdaf.flp`). Measurements are checked on the client
side with typed errors (the draft's ``encode`` assumes valid input).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from privhist.core.errors import ValidationError
from privhist.federated.vdaf.field import FIELDS, Field64, Field128, FieldVec
from privhist.federated.vdaf.flp import GadgetCall, Mul, ParallelSum, PolyEval, Valid


def _int(value: object, name: str, function: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValidationError(name, function, f"an integer in [{lo}, {hi}]", value)
    v = int(value)
    if not lo <= v <= hi:
        raise ValidationError(name, function, f"an integer in [{lo}, {hi}]", value)
    return v


def range_weights(field: type[FieldVec], max_measurement: int) -> FieldVec:
    """Weights of the modified bit encoding: powers of two, the last making the sum
    ``max_measurement`` (draft ``encode_range_checked_int``)."""
    return _range_weights(field.NAME, max_measurement)


@lru_cache(maxsize=64)
def _range_weights(name: str, max_measurement: int) -> FieldVec:
    field = FIELDS[name]
    bits = max_measurement.bit_length()
    rest = 2 ** (bits - 1) - 1
    return field.from_ints([1 << i for i in range(bits - 1)] + [max_measurement - rest])


def encode_range_checked_int(value: int, max_measurement: int) -> list[int]:
    """The 0/1 encoding of ``value`` in ``[0, max_measurement]`` (draft Section 7.4.2)."""
    bits = max_measurement.bit_length()
    rest_all_ones = 2 ** (bits - 1) - 1
    last_weight = max_measurement - rest_all_ones
    if value <= rest_all_ones:
        rest, last = value, 0
    else:
        rest, last = value - last_weight, 1
    return [(rest >> i) & 1 for i in range(bits - 1)] + [last]


def _decode_range(field: type[FieldVec], enc: FieldVec, max_measurement: int) -> FieldVec:
    """Linear decoding of (shares of) encodings on the last axis."""
    return (enc * range_weights(field, max_measurement)).sum(axis=-1)


def _shares_inv(field: type[FieldVec], num_shares: int) -> FieldVec:
    return _shares_inv_of(field.NAME, num_shares)


@lru_cache(maxsize=64)
def _shares_inv_of(name: str, num_shares: int) -> FieldVec:
    field = FIELDS[name]
    return field.from_ints(field.inv(num_shares))


def _chunked_range_check(
    field: type[FieldVec],
    meas: FieldVec,
    joint_rand: FieldVec,
    num_shares: int,
    chunk: int,
    calls: int,
    call: GadgetCall,
) -> FieldVec:
    """``sum_i ParallelSum(Mul)(r_i x_{ic} , x_{ic} - 1/s, r_i**2 x_{ic+1}, ...)`` over the calls
    (the loop shared by the draft's SumVec, Histogram and MultihotCountVec circuits)."""
    lead, n = meas.shape[:-1], meas.shape[-1]
    padded = field.zeros((*lead, calls * chunk))
    padded[..., :n] = meas
    x = padded.reshape(*lead, calls, chunk)
    # powers r_i**(j+1), j < chunk, by doubling
    powers = field.zeros((*lead, calls, chunk))
    powers[..., 0] = joint_rand
    k = 1
    while k < chunk:
        m = min(k, chunk - k)
        powers[..., k : k + m] = powers[..., :m] * powers[..., k - 1 : k]
        k += m
    inputs = field.stack([powers * x, x - _shares_inv(field, num_shares)], axis=-1)
    out: FieldVec = call(0, inputs.reshape(*lead, calls, 2 * chunk))
    return out.sum(axis=-1)


class Count(Valid[int, int]):
    """Prio3Count's circuit (draft Section 7.4.1)."""

    NAME = "Count"

    def __init__(self, field: type[FieldVec] = Field64) -> None:
        self.field = field
        self.GADGETS = [Mul()]
        self.GADGET_CALLS = [1]
        self.MEAS_LEN = 1
        self.JOINT_RAND_LEN = 0
        self.OUTPUT_LEN = 1
        self.EVAL_OUTPUT_LEN = 1

    def encode(self, measurement: int) -> FieldVec:
        return self.field.from_ints([_int(measurement, "measurement", "Prio3Count", 0, 1)])

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        m = meas[..., :1]
        sq: FieldVec = call(0, self.field.stack([m, m], axis=-1))
        return sq - m

    def truncate(self, meas: FieldVec) -> FieldVec:
        return meas

    def decode(self, output: FieldVec, num_measurements: int) -> int:
        return output.to_ints()[0]


class Sum(Valid[int, int]):
    """Prio3Sum's circuit (draft Section 7.4.2): measurements in ``[0, max_measurement]``."""

    NAME = "Sum"

    def __init__(self, field: type[FieldVec], max_measurement: int) -> None:
        _int(max_measurement, "max_measurement", "Sum", 1, field.MODULUS - 1)
        self.field = field
        self.max_measurement = int(max_measurement)
        self.bits = self.max_measurement.bit_length()
        self.GADGETS = [PolyEval([0, -1, 1], self.bits)]
        self.GADGET_CALLS = [self.bits]
        self.MEAS_LEN = self.bits
        self.JOINT_RAND_LEN = 0
        self.OUTPUT_LEN = 1
        self.EVAL_OUTPUT_LEN = self.bits

    def encode(self, measurement: int) -> FieldVec:
        v = _int(measurement, "measurement", "Prio3Sum", 0, self.max_measurement)
        return self.field.from_ints(encode_range_checked_int(v, self.max_measurement))

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        out: FieldVec = call(0, meas.reshape(*meas.shape[:-1], self.bits, 1))
        return out

    def truncate(self, meas: FieldVec) -> FieldVec:
        dec = _decode_range(self.field, meas, self.max_measurement)
        return dec.reshape(*meas.shape[:-1], 1)

    def decode(self, output: FieldVec, num_measurements: int) -> int:
        return output.to_ints()[0]


class SumVec(Valid[list[int], list[int]]):
    """Prio3SumVec's circuit (draft Section 7.4.3): ``length`` integers in
    ``[0, max_measurement]``."""

    NAME = "SumVec"

    def __init__(
        self, field: type[FieldVec], length: int, max_measurement: int, chunk_length: int
    ) -> None:
        fn = "SumVec"
        _int(length, "length", fn, 1, 1 << 40)
        _int(max_measurement, "max_measurement", fn, 1, field.MODULUS - 1)
        _int(chunk_length, "chunk_length", fn, 1, 1 << 40)
        self.field = field
        self.length = int(length)
        self.max_measurement = int(max_measurement)
        self.chunk_length = int(chunk_length)
        self.bits = self.max_measurement.bit_length()
        self.GADGETS = [ParallelSum(Mul(), self.chunk_length)]
        self.GADGET_CALLS = [-(-self.length * self.bits // self.chunk_length)]
        self.MEAS_LEN = self.length * self.bits
        self.OUTPUT_LEN = self.length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]
        self.EVAL_OUTPUT_LEN = 1

    def encode(self, measurement: list[int]) -> FieldVec:
        fn = "Prio3SumVec"
        if len(measurement) != self.length:
            raise ValidationError("measurement", fn, f"a list of {self.length} integers", "")
        enc: list[int] = []
        for v in measurement:
            x = _int(v, "measurement", fn, 0, self.max_measurement)
            enc += encode_range_checked_int(x, self.max_measurement)
        return self.field.from_ints(enc)

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        return _chunked_range_check(
            self.field,
            meas,
            joint_rand,
            num_shares,
            self.chunk_length,
            self.GADGET_CALLS[0],
            call,
        ).reshape(*meas.shape[:-1], 1)

    def truncate(self, meas: FieldVec) -> FieldVec:
        enc = meas.reshape(*meas.shape[:-1], self.length, self.bits)
        return _decode_range(self.field, enc, self.max_measurement)

    def decode(self, output: FieldVec, num_measurements: int) -> list[int]:
        return output.to_ints()


class Histogram(Valid[int, list[int]]):
    """Prio3Histogram's circuit (draft Section 7.4.4): a one-hot vector of ``length`` buckets."""

    NAME = "Histogram"

    def __init__(self, field: type[FieldVec], length: int, chunk_length: int) -> None:
        fn = "Histogram"
        _int(length, "length", fn, 1, 1 << 40)
        _int(chunk_length, "chunk_length", fn, 1, 1 << 40)
        self.field = field
        self.length = int(length)
        self.chunk_length = int(chunk_length)
        self.GADGETS = [ParallelSum(Mul(), self.chunk_length)]
        self.GADGET_CALLS = [-(-self.length // self.chunk_length)]
        self.MEAS_LEN = self.length
        self.OUTPUT_LEN = self.length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]
        self.EVAL_OUTPUT_LEN = 2

    def encode(self, measurement: int) -> FieldVec:
        b = _int(measurement, "measurement", "Prio3Histogram", 0, self.length - 1)
        one_hot = [0] * self.length
        one_hot[b] = 1
        return self.field._from_list(one_hot, (self.length,))

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        rc = _chunked_range_check(
            self.field,
            meas,
            joint_rand,
            num_shares,
            self.chunk_length,
            self.GADGET_CALLS[0],
            call,
        )
        sc = meas.sum(axis=-1) - _shares_inv(self.field, num_shares)
        return self.field.stack([rc, sc], axis=-1)

    def truncate(self, meas: FieldVec) -> FieldVec:
        return meas

    def decode(self, output: FieldVec, num_measurements: int) -> list[int]:
        return output.to_ints()


class MultihotCountVec(Valid[list[bool], list[int]]):
    """Prio3MultihotCountVec's circuit (draft Section 7.4.5): a 0/1 vector with at most
    ``max_weight`` ones."""

    NAME = "MultihotCountVec"

    def __init__(
        self, field: type[FieldVec], length: int, max_weight: int, chunk_length: int
    ) -> None:
        fn = "MultihotCountVec"
        _int(length, "length", fn, 1, 1 << 40)
        _int(max_weight, "max_weight", fn, 1, int(length))
        _int(chunk_length, "chunk_length", fn, 1, 1 << 40)
        if field.MODULUS <= length:
            raise ValidationError("length", fn, "below the field modulus", length)
        self.field = field
        self.length = int(length)
        self.max_weight = int(max_weight)
        self.chunk_length = int(chunk_length)
        self.bits_for_weight = self.max_weight.bit_length()
        self.GADGETS = [ParallelSum(Mul(), self.chunk_length)]
        self.GADGET_CALLS = [-(-(self.length + self.bits_for_weight) // self.chunk_length)]
        self.MEAS_LEN = self.length + self.bits_for_weight
        self.OUTPUT_LEN = self.length
        self.JOINT_RAND_LEN = self.GADGET_CALLS[0]
        self.EVAL_OUTPUT_LEN = 2

    def encode(self, measurement: list[bool]) -> FieldVec:
        fn = "Prio3MultihotCountVec"
        if len(measurement) != self.length:
            raise ValidationError("measurement", fn, f"a list of {self.length} booleans", "")
        bits = [int(_int(int(x), "measurement", fn, 0, 1)) for x in measurement]
        weight = sum(bits)
        if weight > self.max_weight:
            raise ValidationError("measurement", fn, f"of weight <= {self.max_weight}", weight)
        return self.field.from_ints(bits + encode_range_checked_int(weight, self.max_weight))

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        rc = _chunked_range_check(
            self.field,
            meas,
            joint_rand,
            num_shares,
            self.chunk_length,
            self.GADGET_CALLS[0],
            call,
        )
        weight = meas[..., : self.length].sum(axis=-1)
        reported = _decode_range(self.field, meas[..., self.length :], self.max_weight)
        return self.field.stack([rc, weight - reported], axis=-1)

    def truncate(self, meas: FieldVec) -> FieldVec:
        return meas[..., : self.length]

    def decode(self, output: FieldVec, num_measurements: int) -> list[int]:
        return output.to_ints()


class HigherDegree(Valid[int, int]):
    """The draft repository's test circuit with a degree-3 gadget: ``x (x - 1) (x - 2)`` over
    Field64 (used by its ``Prio3HigherDegree`` test vector; not a deployed variant)."""

    NAME = "HigherDegree"

    def __init__(self) -> None:
        self.field = Field64
        self.GADGETS = [PolyEval([0, 2, -3, 1], 1)]
        self.GADGET_CALLS = [1]
        self.MEAS_LEN = 1
        self.JOINT_RAND_LEN = 0
        self.OUTPUT_LEN = 1
        self.EVAL_OUTPUT_LEN = 1

    def encode(self, measurement: int) -> FieldVec:
        return self.field.from_ints([_int(measurement, "measurement", "HigherDegree", 0, 2)])

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        out: FieldVec = call(0, meas.reshape(*meas.shape[:-1], 1, 1))
        return out

    def truncate(self, meas: FieldVec) -> FieldVec:
        return meas

    def decode(self, output: FieldVec, num_measurements: int) -> int:
        return output.to_ints()[0]


__all__ = [
    "Count",
    "Field64",
    "Field128",
    "HigherDegree",
    "Histogram",
    "MultihotCountVec",
    "Sum",
    "SumVec",
]
