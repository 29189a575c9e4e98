"""The fully linear proof of draft-irtf-cfrg-vdaf-20, Section 7.3 (BBCGGI19, Section 4.2).

A validity circuit (:class:`Valid`) evaluates an encoded measurement with affine gates and calls
to *gadgets* (non-affine sub-circuits, Appendix A of the draft): :class:`Mul`,
:class:`PolyEval` and :class:`ParallelSum`. The prover records the inputs of every call of each
gadget as the values of the *wire polynomials* at the roots of unity ``w**1 .. w**calls``
(``w**0`` holds a random *wire seed*), and sends the seeds and the values of the *gadget
polynomial* (the gadget applied to the wire polynomials). The verifier, holding an additive
share of the measurement and of the proof, re-runs the circuit with the gadget outputs read off
the gadget polynomial, and evaluates the wire and gadget polynomials at a random point ``t``;
the shares of these evaluations and of the circuit output form its *verifier share*. Summed,
they are checked by :meth:`Flp.decide`: the circuit output is 0 and each gadget applied to the
wire evaluations equals the gadget polynomial's evaluation.

Vectorisation. A circuit passes *all* calls of a gadget at once, as a (calls x arity) array, to
a runner (:meth:`Valid.eval`'s ``call`` argument), instead of one call at a time: the recorded
wire values, the outputs and therefore the proof and verifier messages are those of the draft's
sequential ``ProveGadget`` / ``QueryGadget`` shims. ``ParallelSum(Mul)`` computes the gadget
polynomial of all its multiplications with one batched NTT. The circuits and :meth:`Flp.query`
also accept leading axes (one row per report), so an aggregator queries a batch of reports with
the same array operations as one (:meth:`~privhist.federated.vdaf.prio3.Prio3.verify_init_many`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ProtocolError, ValidationError
from privhist.federated.vdaf import poly
from privhist.federated.vdaf.field import FieldVec

F = TypeVar("F", bound=FieldVec)

#: ``call(gadget_index, inputs)`` with inputs of shape (calls, arity) -> outputs (calls,)
GadgetCall = Callable[[int, Any], Any]


def wire_poly_len(gadget_calls: int) -> int:
    """Values per wire polynomial: ``next_power_of_2(1 + calls)`` (draft Section 7.3.2)."""
    return poly.next_power_of_2(1 + gadget_calls)


def gadget_poly_len(degree: int, wire_len: int) -> int:
    """Values of a gadget polynomial sent in the proof: ``degree (P - 1) + 1``."""
    return degree * (wire_len - 1) + 1


# --------------------------------------------------------------------------------------------
# gadgets (draft Appendix A)


class Gadget:
    """A non-affine sub-circuit: ``eval`` on (calls, ARITY) inputs, ``eval_poly`` on wire
    polynomials given by their values (ARITY, P) -> values of the gadget polynomial."""

    ARITY: int
    DEGREE: int

    def eval(self, field: type[F], inp: F) -> F:
        raise NotImplementedError

    def eval_poly_batch(self, field: type[F], wires: F) -> F:
        """Batched ``eval_poly``: wires (B, ARITY, P) -> (B, N) values."""
        raise NotImplementedError

    def eval_poly(self, field: type[F], wires: F) -> F:
        a, p = wires.shape
        return self.eval_poly_batch(field, wires.reshape(1, a, p))[0]


class Mul(Gadget):
    """``Mul(x, y) = x * y`` (draft Appendix A.1): arity 2, degree 2."""

    ARITY = 2
    DEGREE = 2

    def eval(self, field: type[F], inp: F) -> F:
        return inp[..., 0] * inp[..., 1]

    def eval_poly_batch(self, field: type[F], wires: F) -> F:
        doubled = poly.double_evaluations(wires)  # (B, 2, 2P)
        return doubled[:, 0, :] * doubled[:, 1, :]


class PolyEval(Gadget):
    """``PolyEval(x) = p(x)`` for a fixed polynomial ``p`` (draft Appendix A.2): arity 1,
    degree ``deg p``.

    Args:
        coefficients: ``p``'s integer coefficients, constant term first.
        num_calls: How many times the circuit calls it (fixes the evaluation size).
    """

    ARITY = 1

    def __init__(self, coefficients: list[int], num_calls: int) -> None:
        coeffs = list(coefficients)
        while coeffs and coeffs[-1] == 0:
            coeffs.pop()
        if not coeffs:
            raise ValidationError("coefficients", "PolyEval", "a nonzero polynomial", coefficients)
        self.p = coeffs
        self.DEGREE = len(coeffs) - 1
        self.n = poly.next_power_of_2(gadget_poly_len(self.DEGREE, wire_poly_len(num_calls)))

    def _horner(self, field: type[F], x: F) -> F:
        acc = field.from_ints(self.p[-1]).broadcast_to(x.shape)
        for c in reversed(self.p[:-1]):
            acc = acc * x + field.from_ints(c)
        return acc

    def eval(self, field: type[F], inp: F) -> F:
        return self._horner(field, inp[..., 0])

    def eval_poly_batch(self, field: type[F], wires: F) -> F:
        b, _, p_len = wires.shape
        coeffs = poly.inv_ntt(wires[:, 0, :])  # (B, P)
        if self.n > p_len:
            coeffs = field.concat([coeffs, field.zeros((b, self.n - p_len))], axis=-1)
        values = poly.ntt(coeffs[:, : self.n])
        return self._horner(field, values)


class ParallelSum(Gadget):
    """``sum_i sub(x_i)`` over ``count`` calls of a sub-circuit (draft Appendix A.3)."""

    def __init__(self, subcircuit: Gadget, count: int) -> None:
        self.subcircuit = subcircuit
        self.count = count
        self.ARITY = subcircuit.ARITY * count
        self.DEGREE = subcircuit.DEGREE

    def eval(self, field: type[F], inp: F) -> F:
        lead, calls = inp.shape[:-2], inp.shape[-2]
        a = self.subcircuit.ARITY
        out = self.subcircuit.eval(field, inp.reshape(*lead, calls * self.count, a))
        return out.reshape(*lead, calls, self.count).sum(axis=-1)

    def eval_poly_batch(self, field: type[F], wires: F) -> F:
        b, _, p_len = wires.shape
        a = self.subcircuit.ARITY
        inner = self.subcircuit.eval_poly_batch(field, wires.reshape(b * self.count, a, p_len))
        n_out = poly.next_power_of_2(gadget_poly_len(self.DEGREE, p_len))
        return inner[:, :n_out].reshape(b, self.count, n_out).sum(axis=1)


# --------------------------------------------------------------------------------------------
# validity circuits (draft Section 7.3.2)


M = TypeVar("M")
R = TypeVar("R")


class Valid(Generic[M, R]):
    """A validity circuit: parameters and ``encode`` / ``eval`` / ``truncate`` / ``decode``."""

    field: type[FieldVec]
    GADGETS: list[Gadget]
    GADGET_CALLS: list[int]
    MEAS_LEN: int
    JOINT_RAND_LEN: int
    EVAL_OUTPUT_LEN: int
    OUTPUT_LEN: int
    NAME: ClassVar[str] = "Valid"

    def encode(self, measurement: M) -> FieldVec:
        raise NotImplementedError

    def eval(
        self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, call: GadgetCall
    ) -> FieldVec:
        """The circuit's outputs (EVAL_OUTPUT_LEN,); ``call`` evaluates the gadgets."""
        raise NotImplementedError

    def truncate(self, meas: FieldVec) -> FieldVec:
        raise NotImplementedError

    def decode(self, output: FieldVec, num_measurements: int) -> R:
        raise NotImplementedError

    def prove_rand_len(self) -> int:
        return sum(g.ARITY for g in self.GADGETS)

    def query_rand_len(self) -> int:
        n = len(self.GADGETS)
        return n + self.EVAL_OUTPUT_LEN if self.EVAL_OUTPUT_LEN > 1 else n

    def proof_len(self) -> int:
        return sum(
            g.ARITY + gadget_poly_len(g.DEGREE, wire_poly_len(c))
            for g, c in zip(self.GADGETS, self.GADGET_CALLS, strict=True)
        )

    def verifier_len(self) -> int:
        return 1 + sum(g.ARITY + 1 for g in self.GADGETS)

    def evaluate(self, meas: FieldVec, joint_rand: FieldVec, num_shares: int = 1) -> FieldVec:
        """Plain evaluation (gadgets computed directly)."""
        return self.eval(
            meas, joint_rand, num_shares, lambda i, inp: self.GADGETS[i].eval(self.field, inp)
        )


class Flp(Generic[M, R]):
    """FLP of the draft's Section 7.3 for a validity circuit (parameters of its Table 7)."""

    def __init__(self, valid: Valid[M, R]) -> None:
        self.valid = valid
        self.field = valid.field
        self.PROVE_RAND_LEN = valid.prove_rand_len()
        self.QUERY_RAND_LEN = valid.query_rand_len()
        self.JOINT_RAND_LEN = valid.JOINT_RAND_LEN
        self.MEAS_LEN = valid.MEAS_LEN
        self.OUTPUT_LEN = valid.OUTPUT_LEN
        self.PROOF_LEN = valid.proof_len()
        self.VERIFIER_LEN = valid.verifier_len()

    def encode(self, measurement: M) -> FieldVec:
        return self.valid.encode(measurement)

    def truncate(self, meas: FieldVec) -> FieldVec:
        return self.valid.truncate(meas)

    def decode(self, output: FieldVec, num_measurements: int) -> R:
        return self.valid.decode(output, num_measurements)

    def _record(self, meas: FieldVec, joint_rand: FieldVec, num_shares: int, outputs: Any) -> Any:
        """Run the circuit; return its output and each gadget's recorded inputs (calls, arity)."""
        valid = self.valid
        recorded: list[list[FieldVec]] = [[] for _ in valid.GADGETS]
        done = [0] * len(valid.GADGETS)

        def call(i: int, inp: FieldVec) -> FieldVec:
            calls = inp.shape[-2]
            if done[i] + calls > valid.GADGET_CALLS[i]:
                raise ValidationError("calls", valid.NAME, f"<= {valid.GADGET_CALLS[i]}", calls)
            recorded[i].append(inp)
            out: FieldVec = outputs(i, inp, done[i])
            done[i] += calls
            return out

        out = valid.eval(meas, joint_rand, num_shares, call)
        if done != valid.GADGET_CALLS:
            raise ValidationError("calls", valid.NAME, str(valid.GADGET_CALLS), done)
        inputs = [rec[0] if len(rec) == 1 else self.field.concat(rec, axis=-2) for rec in recorded]
        return out, inputs

    def _wires(self, seeds: FieldVec, inputs: FieldVec, calls: int) -> FieldVec:
        """Wire polynomials' values (..., arity, P): seed at ``w**0``, call k's input at
        ``w**k``."""
        lead, arity = seeds.shape[:-1], seeds.shape[-1]
        p_len = wire_poly_len(calls)
        wires = self.field.zeros((*lead, arity, p_len))
        wires[..., 0] = seeds
        wires[..., 1 : calls + 1] = inputs.swap()
        return wires

    def prove(self, meas: FieldVec, prove_rand: FieldVec, joint_rand: FieldVec) -> FieldVec:
        """The proof (draft Section 7.3.3): wire seeds and gadget polynomial of each gadget."""
        valid = self.valid
        _, inputs = self._record(
            meas, joint_rand, 1, lambda i, inp, _start: valid.GADGETS[i].eval(self.field, inp)
        )
        parts: list[FieldVec] = []
        offset = 0
        for g, calls, inp in zip(valid.GADGETS, valid.GADGET_CALLS, inputs, strict=True):
            seeds = prove_rand[offset : offset + g.ARITY]
            offset += g.ARITY
            wires = self._wires(seeds, inp, calls)
            gp = g.eval_poly(self.field, wires)
            parts.append(seeds)
            parts.append(gp[: gadget_poly_len(g.DEGREE, wire_poly_len(calls))])
        return self.field.concat(parts)

    def query(
        self,
        meas: FieldVec,
        proof: FieldVec,
        query_rand: FieldVec,
        joint_rand: FieldVec,
        num_shares: int,
    ) -> FieldVec:
        """A verifier share from shares of the measurement and proof (draft Section 7.3.4).

        Batched: leading axes of the four vectors are reports (each with its own query
        randomness); the output has the same leading axes.

        Raises:
            ProtocolError: A query point is a root of unity (the draft's abort).
        """
        valid = self.valid
        field = self.field
        lead = meas.shape[:-1]
        seeds: list[FieldVec] = []
        polys: list[FieldVec] = []
        steps: list[int] = []
        off = 0
        for g, calls in zip(valid.GADGETS, valid.GADGET_CALLS, strict=True):
            p_len = wire_poly_len(calls)
            g_len = gadget_poly_len(g.DEGREE, p_len)
            seeds.append(proof[..., off : off + g.ARITY])
            gp = proof[..., off + g.ARITY : off + g.ARITY + g_len]
            off += g.ARITY + g_len
            size = poly.next_power_of_2(g_len)
            polys.append(poly.extend_values(gp, size))
            steps.append(size // p_len)

        def outputs(i: int, inp: FieldVec, start: int) -> FieldVec:
            k = np.arange(start + 1, start + inp.shape[-2] + 1)
            return polys[i][..., k * steps[i]]

        out, inputs = self._record(meas, joint_rand, num_shares, outputs)
        n_out = valid.EVAL_OUTPUT_LEN
        if n_out > 1:
            v = (query_rand[..., :n_out] * out).sum(axis=-1).reshape(*lead, 1)
        else:
            v = out.reshape(*lead, 1)
        reports = int(np.prod(lead)) if lead else 1
        points = query_rand[..., n_out if n_out > 1 else 0 :].reshape(reports, -1)
        ts = np.array(points.to_ints(), dtype=object).reshape(reports, -1)
        parts = [v]
        for i, calls in enumerate(valid.GADGET_CALLS):
            p_len = wire_poly_len(calls)
            t = [int(x) for x in ts[:, i]]
            if any(poly.is_root_of_unity(field, x, p_len) for x in t):
                raise ProtocolError("test point is a root of unity")
            wires = self._wires(seeds[i], inputs[i], calls)
            size = polys[i].shape[-1]
            w_wire = poly.lagrange_weights_many(field, p_len, t).reshape(*lead, 1, p_len)
            w_gadget = poly.lagrange_weights_many(field, size, t).reshape(*lead, size)
            parts.append((wires * w_wire).sum(axis=-1))
            parts.append((polys[i] * w_gadget).sum(axis=-1).reshape(*lead, 1))
        return field.concat(parts, axis=-1)

    def decide_many(self, verifier: FieldVec) -> npt.NDArray[np.bool_]:
        """:meth:`decide` for each report on the leading axes of ``verifier``."""
        lead = verifier.shape[:-1]
        ok = verifier[..., 0].is_zero()
        off = 1
        for g in self.valid.GADGETS:
            wire_checks = verifier[..., off : off + g.ARITY]
            gadget_check = verifier[..., off + g.ARITY]
            off += g.ARITY + 1
            got = g.eval(self.field, wire_checks.reshape(*lead, 1, g.ARITY))[..., 0]
            ok = ok & (got - gadget_check).is_zero()
        return np.asarray(ok, dtype=bool)

    def decide(self, verifier: FieldVec) -> bool:
        """Whether the (summed) verifier message accepts (draft Section 7.3.5)."""
        if verifier.shape != (self.VERIFIER_LEN,):
            return False
        if not bool(verifier[0].is_zero()):
            return False
        off = 1
        for g in self.valid.GADGETS:
            wire_checks = verifier[off : off + g.ARITY]
            gadget_check = verifier[off + g.ARITY]
            off += g.ARITY + 1
            if g.eval(self.field, wire_checks.reshape(1, g.ARITY))[0] != gadget_check:
                return False
        return True
