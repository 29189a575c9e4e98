"""Prio3 (draft-irtf-cfrg-vdaf-20, Section 7): an FLP turned into a VDAF.

A client encodes its measurement, splits it into ``SHARES`` additive shares (the helpers' shares
are XOF seeds, Section 7.2.1), derives the joint randomness by Fiat-Shamir from its shares
(*joint randomness parts* hashed with a *blind* per aggregator, published in the public share),
proves validity ``PROOFS`` times and splits the proofs likewise. Each aggregator queries its
shares with query randomness derived from the secret *verification key* and the report nonce,
and broadcasts its verifier share (and its recomputed joint-randomness part); the sum decides
validity, and the joint-randomness seed recomputed from the aggregators' parts must match the one
each aggregator derived with the client's published parts (Section 7.2.2). Only then is the
output share (the truncated measurement share) aggregated.

Messages are encoded as the draft's Section 7.2.6 specifies; :class:`Prio3` implements the
sharding, verification, aggregation and unsharding algorithms, and the variants of Section 7.4
(:func:`prio3_count`, :func:`prio3_sum`, :func:`prio3_sum_vec`, :func:`prio3_histogram`,
:func:`prio3_multihot_count_vec`) fix their field, circuit and number of proofs.

:meth:`Prio3.verify_init_many` and :meth:`Prio3.verifier_shares_to_message_many` give the same
values for a batch of reports with the FLP query run once on the stacked shares (what the
deployed aggregators use); the one-report methods follow the draft's listings line by line.

Domain separation (Section 6.2.3): ``VERSION || algo_class || ID || usage`` (1, 1, 4, 2 bytes,
big-endian) followed by the application context; the draft sets ``VERSION = 18``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.federated.vdaf.circuits import (
    Count,
    HigherDegree,
    Histogram,
    MultihotCountVec,
    Sum,
    SumVec,
)
from privhist.federated.vdaf.field import Field64, Field128, FieldVec
from privhist.federated.vdaf.flp import Flp
from privhist.federated.vdaf.xof import Xof, XofTurboShake128

VERSION = 18

USAGE_MEAS_SHARE = 1
USAGE_PROOF_SHARE = 2
USAGE_JOINT_RANDOMNESS = 3
USAGE_PROVE_RANDOMNESS = 4
USAGE_QUERY_RANDOMNESS = 5
USAGE_JOINT_RAND_SEED = 6
USAGE_JOINT_RAND_PART = 7

M = TypeVar("M")
R = TypeVar("R")


def format_dst(algo_class: int, algo: int, usage: int) -> bytes:
    """The domain separation tag prefix of draft Section 6.2.3."""
    return (
        VERSION.to_bytes(1, "big")
        + algo_class.to_bytes(1, "big")
        + algo.to_bytes(4, "big")
        + usage.to_bytes(2, "big")
    )


@dataclass(frozen=True)
class LeaderShare:
    """Aggregator 0's input share: its measurement share, proofs share and blind."""

    meas: FieldVec
    proofs: FieldVec
    blind: bytes | None


@dataclass(frozen=True)
class HelperShare:
    """A helper's input share: the XOF seed of its shares and its blind."""

    seed: bytes
    blind: bytes | None


InputShare = LeaderShare | HelperShare


@dataclass(frozen=True)
class VerifyState:
    out_share: FieldVec
    corrected_joint_rand_seed: bytes | None


@dataclass(frozen=True)
class VerifierShare:
    verifiers: FieldVec
    joint_rand_part: bytes | None


class Prio3(Generic[M, R]):
    """Prio3 over an FLP (draft Section 7.2), with XofTurboShake128.

    Args:
        flp: The FLP of the variant's validity circuit.
        algorithm_id: The VDAF identifier (Section 10 of the draft), used in domain separation.
        shares: Number of aggregators, in ``[2, 256)``.
        proofs: Number of proofs, in ``[1, 256)``.
        name: The variant's name.
    """

    xof: type[Xof] = XofTurboShake128
    NONCE_SIZE = 16
    ROUNDS = 1

    def __init__(
        self, flp: Flp[M, R], algorithm_id: int, shares: int, proofs: int, name: str
    ) -> None:
        fn = name
        if isinstance(shares, bool) or not isinstance(shares, int) or not 2 <= shares < 256:
            raise ValidationError("shares", fn, "an integer in [2, 256)", shares)
        if isinstance(proofs, bool) or not isinstance(proofs, int) or not 1 <= proofs < 256:
            raise ValidationError("proofs", fn, "an integer in [1, 256)", proofs)
        self.flp = flp
        self.field = flp.field
        self.ID = algorithm_id
        self.SHARES = shares
        self.PROOFS = proofs
        self.name = name
        self.VERIFY_KEY_SIZE = self.xof.SEED_SIZE
        s = self.xof.SEED_SIZE
        self.RAND_SIZE = s * shares if flp.JOINT_RAND_LEN == 0 else 2 * s * shares
        self._dst = {u: format_dst(0, algorithm_id, u) for u in range(1, 8)}

    @property
    def uses_joint_rand(self) -> bool:
        return self.flp.JOINT_RAND_LEN > 0

    def dst(self, usage: int, ctx: bytes) -> bytes:
        return self._dst[usage] + ctx

    # -- auxiliary functions (Section 7.2.5) ----------------------------------------------------

    def helper_meas_share(self, ctx: bytes, agg_id: int, seed: bytes) -> FieldVec:
        return self.xof.expand_into_vec(
            self.field, seed, self.dst(USAGE_MEAS_SHARE, ctx), bytes([agg_id]), self.flp.MEAS_LEN
        )

    def helper_proofs_share(self, ctx: bytes, agg_id: int, seed: bytes) -> FieldVec:
        return self.xof.expand_into_vec(
            self.field,
            seed,
            self.dst(USAGE_PROOF_SHARE, ctx),
            bytes([self.PROOFS, agg_id]),
            self.flp.PROOF_LEN * self.PROOFS,
        )

    def expand_input_share(
        self, ctx: bytes, agg_id: int, share: InputShare
    ) -> tuple[FieldVec, FieldVec, bytes | None]:
        if agg_id > 0:
            if not isinstance(share, HelperShare):
                raise ProtocolError("a helper's input share must be a seed")
            return (
                self.helper_meas_share(ctx, agg_id, share.seed),
                self.helper_proofs_share(ctx, agg_id, share.seed),
                share.blind,
            )
        if not isinstance(share, LeaderShare):
            raise ProtocolError("the leader's input share must carry vectors")
        return share.meas, share.proofs, share.blind

    def prove_rands(self, ctx: bytes, seed: bytes) -> FieldVec:
        return self.xof.expand_into_vec(
            self.field,
            seed,
            self.dst(USAGE_PROVE_RANDOMNESS, ctx),
            bytes([self.PROOFS]),
            self.flp.PROVE_RAND_LEN * self.PROOFS,
        )

    def query_rands(self, verify_key: bytes, ctx: bytes, nonce: bytes) -> FieldVec:
        return self.xof.expand_into_vec(
            self.field,
            verify_key,
            self.dst(USAGE_QUERY_RANDOMNESS, ctx),
            bytes([self.PROOFS]) + nonce,
            self.flp.QUERY_RAND_LEN * self.PROOFS,
        )

    def joint_rand_part(
        self, ctx: bytes, agg_id: int, blind: bytes, meas_share: FieldVec, nonce: bytes
    ) -> bytes:
        return self.xof.derive_seed(
            blind,
            self.dst(USAGE_JOINT_RAND_PART, ctx),
            bytes([agg_id]) + nonce + meas_share.encode(),
        )

    def joint_rand_seed(self, ctx: bytes, parts: list[bytes]) -> bytes:
        return self.xof.derive_seed(
            bytes(self.xof.SEED_SIZE), self.dst(USAGE_JOINT_RAND_SEED, ctx), b"".join(parts)
        )

    def joint_rands(self, ctx: bytes, seed: bytes) -> FieldVec:
        return self.xof.expand_into_vec(
            self.field,
            seed,
            self.dst(USAGE_JOINT_RANDOMNESS, ctx),
            bytes([self.PROOFS]),
            self.flp.JOINT_RAND_LEN * self.PROOFS,
        )

    # -- sharding (Section 7.2.1) ---------------------------------------------------------------

    def shard(
        self, ctx: bytes, measurement: M, nonce: bytes, rand: bytes
    ) -> tuple[list[bytes] | None, list[InputShare]]:
        """Split a measurement into a public share and ``SHARES`` input shares.

        Raises:
            ValidationError: Wrong nonce or randomness size, or an invalid measurement.
        """
        return self.shard_encoded(ctx, self.flp.encode(measurement), nonce, rand)

    def shard_encoded(
        self, ctx: bytes, meas: FieldVec, nonce: bytes, rand: bytes
    ) -> tuple[list[bytes] | None, list[InputShare]]:
        """:meth:`shard` of an already encoded measurement, valid or not (a client that does
        not follow the encoding, as a malicious one may, produces such reports)."""
        if len(nonce) != self.NONCE_SIZE:
            raise ValidationError("nonce", "shard", f"{self.NONCE_SIZE} bytes", len(nonce))
        if len(rand) != self.RAND_SIZE:
            raise ValidationError("rand", "shard", f"{self.RAND_SIZE} bytes", len(rand))
        if meas.shape != (self.flp.MEAS_LEN,) or type(meas) is not self.field:
            raise ValidationError("meas", "shard", f"{self.flp.MEAS_LEN} elements", meas.shape)
        s = self.xof.SEED_SIZE
        seeds = [rand[i : i + s] for i in range(0, self.RAND_SIZE, s)]
        flp = self.flp
        k = self.SHARES - 1
        if self.uses_joint_rand:
            helper_seeds, helper_blinds = seeds[0 : 2 * k : 2], seeds[1 : 2 * k : 2]
            leader_blind, prove_seed = seeds[2 * k], seeds[2 * k + 1]
        else:
            helper_seeds, helper_blinds = seeds[:k], [b""] * k
            leader_blind, prove_seed = b"", seeds[k]
        leader_meas = meas
        parts: list[bytes] = []
        for j in range(k):
            hm = self.helper_meas_share(ctx, j + 1, helper_seeds[j])
            leader_meas = leader_meas - hm
            if self.uses_joint_rand:
                parts.append(self.joint_rand_part(ctx, j + 1, helper_blinds[j], hm, nonce))
        public: list[bytes] | None = None
        joint: FieldVec | None = None
        if self.uses_joint_rand:
            parts.insert(0, self.joint_rand_part(ctx, 0, leader_blind, leader_meas, nonce))
            public = parts
            joint = self.joint_rands(ctx, self.joint_rand_seed(ctx, parts))
        prove_rands = self.prove_rands(ctx, prove_seed)
        proofs = []
        for i in range(self.PROOFS):
            pr = prove_rands[i * flp.PROVE_RAND_LEN : (i + 1) * flp.PROVE_RAND_LEN]
            jr = (
                joint[i * flp.JOINT_RAND_LEN : (i + 1) * flp.JOINT_RAND_LEN]
                if joint is not None
                else self.field.zeros(0)
            )
            proofs.append(flp.prove(meas, pr, jr))
        leader_proofs = proofs[0] if len(proofs) == 1 else self.field.concat(proofs)
        for j in range(k):
            leader_proofs = leader_proofs - self.helper_proofs_share(ctx, j + 1, helper_seeds[j])
        blind = leader_blind if self.uses_joint_rand else None
        shares: list[InputShare] = [LeaderShare(leader_meas, leader_proofs, blind)]
        for j in range(k):
            shares.append(
                HelperShare(helper_seeds[j], helper_blinds[j] if self.uses_joint_rand else None)
            )
        return public, shares

    def shard_random(
        self, ctx: bytes, measurement: M, rng: RandomSource | None = None
    ) -> tuple[bytes, list[bytes] | None, list[InputShare]]:
        """Shard with a fresh nonce and randomness from ``rng`` (secure by default)."""
        src = SecureRandom() if rng is None else rng
        words = src.uint64((self.NONCE_SIZE + self.RAND_SIZE + 7) // 8).tobytes()
        nonce, rand = words[: self.NONCE_SIZE], words[self.NONCE_SIZE :][: self.RAND_SIZE]
        public, shares = self.shard(ctx, measurement, nonce, rand)
        return nonce, public, shares

    # -- verification (Section 7.2.2) -----------------------------------------------------------

    def verify_init(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        nonce: bytes,
        public_share: list[bytes] | None,
        input_share: InputShare,
    ) -> tuple[VerifyState, VerifierShare]:
        """An aggregator's verification state and verifier share for one report.

        Raises:
            ProtocolError: Malformed shares, or a query point that is a root of unity.
        """
        if len(verify_key) != self.VERIFY_KEY_SIZE:
            raise ValidationError("verify_key", "verify_init", f"{self.VERIFY_KEY_SIZE} bytes", "")
        if not 0 <= agg_id < self.SHARES:
            raise ValidationError("agg_id", "verify_init", f"in [0, {self.SHARES})", agg_id)
        if len(nonce) != self.NONCE_SIZE:
            raise ProtocolError(f"nonce must be {self.NONCE_SIZE} bytes")
        flp = self.flp
        meas, proofs, blind = self.expand_input_share(ctx, agg_id, input_share)
        out_share = flp.truncate(meas)
        joint: FieldVec | None = None
        corrected: bytes | None = None
        part: bytes | None = None
        if self.uses_joint_rand:
            if blind is None or public_share is None or len(public_share) != self.SHARES:
                raise ProtocolError("joint randomness parts or blind missing")
            part = self.joint_rand_part(ctx, agg_id, blind, meas, nonce)
            parts = list(public_share)
            parts[agg_id] = part
            corrected = self.joint_rand_seed(ctx, parts)
            joint = self.joint_rands(ctx, corrected)
        query = self.query_rands(verify_key, ctx, nonce)
        verifiers = []
        for i in range(self.PROOFS):
            proof = proofs[i * flp.PROOF_LEN : (i + 1) * flp.PROOF_LEN]
            qr = query[i * flp.QUERY_RAND_LEN : (i + 1) * flp.QUERY_RAND_LEN]
            jr = (
                joint[i * flp.JOINT_RAND_LEN : (i + 1) * flp.JOINT_RAND_LEN]
                if joint is not None
                else self.field.zeros(0)
            )
            verifiers.append(flp.query(meas, proof, qr, jr, self.SHARES))
        vs = verifiers[0] if len(verifiers) == 1 else self.field.concat(verifiers)
        return VerifyState(out_share, corrected), VerifierShare(vs, part)

    def _xof_bytes(self, seed: bytes, usage: int, ctx: bytes, binder: bytes, n: int) -> bytes:
        """The first ``n`` field elements' worth of XOF output (candidates before rejection)."""
        xof = self.xof(seed, self.dst(usage, ctx), binder)
        return xof.next(n * self.field.ENCODED_SIZE)

    def verify_init_many(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        reports: list[tuple[bytes, list[bytes] | None, InputShare]],
    ) -> list[tuple[VerifyState, VerifierShare] | ProtocolError]:
        """:meth:`verify_init` for many reports ``(nonce, public_share, input_share)`` at once.

        The XOFs run per report but their outputs are decoded together, and the FLP query runs
        once on the stacked shares; the values are those of one :meth:`verify_init` per report
        (a report whose XOF output needs rejection sampling, probability about ``2**-60`` per
        element, is redone by :meth:`verify_init`). A failing report gets its error in place of
        its result.
        """
        if len(verify_key) != self.VERIFY_KEY_SIZE:
            raise ValidationError("verify_key", "verify_init", f"{self.VERIFY_KEY_SIZE} bytes", "")
        if not 0 <= agg_id < self.SHARES:
            raise ValidationError("agg_id", "verify_init", f"in [0, {self.SHARES})", agg_id)
        flp, field = self.flp, self.field
        n_meas, n_proof = flp.MEAS_LEN, flp.PROOF_LEN * self.PROOFS
        n_joint, n_query = flp.JOINT_RAND_LEN * self.PROOFS, flp.QUERY_RAND_LEN * self.PROOFS
        results: list[tuple[VerifyState, VerifierShare] | ProtocolError] = []
        rows: list[int] = []
        meas_b: list[bytes] = []
        proof_b: list[bytes] = []
        joint_b: list[bytes] = []
        query_b: list[bytes] = []
        seeds: list[tuple[bytes | None, bytes | None]] = []
        for r, (nonce, public_share, share) in enumerate(reports):
            results.append(ProtocolError("pending"))
            try:
                if len(nonce) != self.NONCE_SIZE:
                    raise ProtocolError(f"nonce must be {self.NONCE_SIZE} bytes")
                if agg_id > 0:
                    if not isinstance(share, HelperShare):
                        raise ProtocolError("a helper's input share must be a seed")
                    mb = self._xof_bytes(share.seed, USAGE_MEAS_SHARE, ctx, bytes([agg_id]), n_meas)
                    pb = self._xof_bytes(
                        share.seed, USAGE_PROOF_SHARE, ctx, bytes([self.PROOFS, agg_id]), n_proof
                    )
                else:
                    if not isinstance(share, LeaderShare):
                        raise ProtocolError("the leader's input share must carry vectors")
                    mb, pb = share.meas.encode(), share.proofs.encode()
                corrected = part = None
                if self.uses_joint_rand:
                    if share.blind is None or public_share is None:
                        raise ProtocolError("joint randomness parts or blind missing")
                    if len(public_share) != self.SHARES:
                        raise ProtocolError("joint randomness parts missing")
                    part = self.xof.derive_seed(
                        share.blind,
                        self.dst(USAGE_JOINT_RAND_PART, ctx),
                        bytes([agg_id]) + nonce + mb,
                    )
                    parts = list(public_share)
                    parts[agg_id] = part
                    corrected = self.joint_rand_seed(ctx, parts)
                    joint_b.append(
                        self._xof_bytes(
                            corrected, USAGE_JOINT_RANDOMNESS, ctx, bytes([self.PROOFS]), n_joint
                        )
                    )
                query_b.append(
                    self._xof_bytes(
                        verify_key,
                        USAGE_QUERY_RANDOMNESS,
                        ctx,
                        bytes([self.PROOFS]) + nonce,
                        n_query,
                    )
                )
            except ProtocolError as exc:
                results[r] = exc
                continue
            rows.append(r)
            meas_b.append(mb)
            proof_b.append(pb)
            seeds.append((corrected, part))
        if not rows:
            return results
        k = len(rows)
        raw_m = field._from_le_bytes(b"".join(meas_b), k * n_meas)
        raw_p = field._from_le_bytes(b"".join(proof_b), k * n_proof)
        raw_q = field._from_le_bytes(b"".join(query_b), k * n_query)
        raw_j = (
            field._from_le_bytes(b"".join(joint_b), k * n_joint)
            if self.uses_joint_rand
            else field.zeros(k * 0)
        )
        ok = np.ones(k, dtype=bool)
        for raw, n in ((raw_m, n_meas), (raw_p, n_proof), (raw_q, n_query), (raw_j, n_joint)):
            if n:
                ok &= field._canonical(raw.v).reshape(k, n).all(axis=1)
        if not bool(ok.all()):
            # a leader share out of range is malformed; an XOF candidate out of range needs
            # rejection sampling: both are left to the one-report path
            for i in np.flatnonzero(~ok):
                r = rows[i]
                nonce, public_share, share = reports[r]
                try:
                    results[r] = self.verify_init(
                        verify_key, ctx, agg_id, nonce, public_share, share
                    )
                except ProtocolError as exc:
                    results[r] = exc
            keep = np.flatnonzero(ok)
            if keep.size == 0:
                return results
        else:
            keep = np.arange(k)
        meas = raw_m.reshape(k, n_meas)[keep]
        proofs = raw_p.reshape(k, n_proof)[keep]
        query = raw_q.reshape(k, n_query)[keep]
        joint = raw_j.reshape(k, n_joint)[keep]
        verifiers = []
        try:
            for pi in range(self.PROOFS):
                pl, ql, jl = flp.PROOF_LEN, flp.QUERY_RAND_LEN, flp.JOINT_RAND_LEN
                verifiers.append(
                    flp.query(
                        meas,
                        proofs[:, pi * pl : (pi + 1) * pl],
                        query[:, pi * ql : (pi + 1) * ql],
                        joint[:, pi * jl : (pi + 1) * jl],
                        self.SHARES,
                    )
                )
        except ProtocolError:
            # a query point hit a root of unity (probability about 2**-60): one at a time
            for i in keep:
                r = rows[i]
                nonce, public_share, share = reports[r]
                try:
                    results[r] = self.verify_init(
                        verify_key, ctx, agg_id, nonce, public_share, share
                    )
                except ProtocolError as exc:
                    results[r] = exc
            return results
        vs_all = verifiers[0] if len(verifiers) == 1 else field.concat(verifiers, axis=-1)
        outs = flp.truncate(meas)
        for j, i in enumerate(keep):
            corrected, part = seeds[i]
            results[rows[i]] = (
                VerifyState(outs[j], corrected),
                VerifierShare(vs_all[j], part),
            )
        return results

    def verifier_shares_to_message_many(
        self, ctx: bytes, shares: list[list[VerifierShare]]
    ) -> list[bytes | ProtocolError | None]:
        """:meth:`verifier_shares_to_message` for many reports (each a list of ``SHARES``
        verifier shares): the decisions are taken on the stacked sums."""
        flp = self.flp
        out: list[bytes | ProtocolError | None] = []
        good: list[int] = []
        for r, sh in enumerate(shares):
            if len(sh) != self.SHARES or any(
                x.verifiers.shape != (flp.VERIFIER_LEN * self.PROOFS,) for x in sh
            ):
                out.append(ProtocolError("verifier shares of the wrong number or length"))
            elif self.uses_joint_rand and any(x.joint_rand_part is None for x in sh):
                out.append(ProtocolError("joint randomness part missing"))
            else:
                out.append(None)
                good.append(r)
        if not good:
            return out
        field = self.field
        total = field.stack([shares[r][0].verifiers for r in good])
        for j in range(1, self.SHARES):
            total = total + field.stack([shares[r][j].verifiers for r in good])
        ok = np.ones(len(good), dtype=bool)
        for i in range(self.PROOFS):
            vl = flp.VERIFIER_LEN
            ok &= flp.decide_many(total[:, i * vl : (i + 1) * vl])
        for k, r in enumerate(good):
            if not ok[k]:
                out[r] = ProtocolError("proof verifier check failed")
            elif self.uses_joint_rand:
                parts = [x.joint_rand_part or b"" for x in shares[r]]
                out[r] = self.joint_rand_seed(ctx, parts)
        return out

    def verifier_shares_to_message(self, ctx: bytes, shares: list[VerifierShare]) -> bytes | None:
        """Combine the verifier shares, decide, and return the joint randomness seed.

        Raises:
            ProtocolError: A proof is rejected (the report is invalid) or shares are malformed.
        """
        if len(shares) != self.SHARES:
            raise ProtocolError(f"expected {self.SHARES} verifier shares, got {len(shares)}")
        flp = self.flp
        total = self.field.zeros(flp.VERIFIER_LEN * self.PROOFS)
        parts = []
        for sh in shares:
            if sh.verifiers.shape != total.shape:
                raise ProtocolError("verifier share of the wrong length")
            total = total + sh.verifiers
            if self.uses_joint_rand:
                if sh.joint_rand_part is None:
                    raise ProtocolError("joint randomness part missing")
                parts.append(sh.joint_rand_part)
        for i in range(self.PROOFS):
            if not flp.decide(total[i * flp.VERIFIER_LEN : (i + 1) * flp.VERIFIER_LEN]):
                raise ProtocolError("proof verifier check failed")
        return self.joint_rand_seed(ctx, parts) if self.uses_joint_rand else None

    def verify_next(self, state: VerifyState, message: bytes | None) -> FieldVec:
        """The output share, if the joint randomness seed agrees with this aggregator's.

        Raises:
            ProtocolError: The joint randomness check fails.
        """
        if message != state.corrected_joint_rand_seed:
            raise ProtocolError("joint randomness check failed")
        return state.out_share

    # -- aggregation and unsharding (Sections 7.2.3, 7.2.4) -------------------------------------

    def agg_init(self) -> FieldVec:
        return self.field.zeros(self.flp.OUTPUT_LEN)

    def agg_update(self, agg_share: FieldVec, out_share: FieldVec) -> FieldVec:
        return agg_share + out_share

    def merge(self, agg_shares: list[FieldVec]) -> FieldVec:
        agg = self.agg_init()
        for a in agg_shares:
            agg = agg + a
        return agg

    def unshard(self, agg_shares: list[FieldVec], num_measurements: int) -> R:
        return self.flp.decode(self.merge(agg_shares), num_measurements)

    # -- encodings (Section 7.2.6) --------------------------------------------------------------

    def encode_public_share(self, public: list[bytes] | None) -> bytes:
        return b"" if public is None else b"".join(public)

    def decode_public_share(self, data: bytes) -> list[bytes] | None:
        s = self.xof.SEED_SIZE
        if not self.uses_joint_rand:
            if data:
                raise ProtocolError("public share must be empty")
            return None
        if len(data) != s * self.SHARES:
            raise ProtocolError(f"public share must be {s * self.SHARES} bytes")
        return [data[i : i + s] for i in range(0, len(data), s)]

    def input_share_size(self, agg_id: int) -> int:
        s = self.xof.SEED_SIZE
        blind = s if self.uses_joint_rand else 0
        if agg_id > 0:
            return s + blind
        flp = self.flp
        return self.field.ENCODED_SIZE * (flp.MEAS_LEN + flp.PROOF_LEN * self.PROOFS) + blind

    def encode_input_share(self, share: InputShare) -> bytes:
        if isinstance(share, LeaderShare):
            return share.meas.encode() + share.proofs.encode() + (share.blind or b"")
        return share.seed + (share.blind or b"")

    def decode_input_share(self, agg_id: int, data: bytes) -> InputShare:
        if len(data) != self.input_share_size(agg_id):
            raise ProtocolError(
                f"input share of aggregator {agg_id} must be {self.input_share_size(agg_id)} bytes"
            )
        s = self.xof.SEED_SIZE
        blind = data[-s:] if self.uses_joint_rand else None
        body = data[:-s] if self.uses_joint_rand else data
        if agg_id > 0:
            return HelperShare(body, blind)
        k = self.field.ENCODED_SIZE * self.flp.MEAS_LEN
        return LeaderShare(self.field.decode(body[:k]), self.field.decode(body[k:]), blind)

    def encode_verifier_share(self, share: VerifierShare) -> bytes:
        return share.verifiers.encode() + (share.joint_rand_part or b"")

    def decode_verifier_share(self, data: bytes) -> VerifierShare:
        s = self.xof.SEED_SIZE
        k = self.field.ENCODED_SIZE * self.flp.VERIFIER_LEN * self.PROOFS
        if len(data) != k + (s if self.uses_joint_rand else 0):
            raise ProtocolError("verifier share of the wrong length")
        part = data[k:] if self.uses_joint_rand else None
        return VerifierShare(self.field.decode(data[:k]), part)

    def encode_verifier_message(self, message: bytes | None) -> bytes:
        return message or b""

    def decode_verifier_message(self, data: bytes) -> bytes | None:
        if not self.uses_joint_rand:
            if data:
                raise ProtocolError("verifier message must be empty")
            return None
        if len(data) != self.xof.SEED_SIZE:
            raise ProtocolError("verifier message must be one seed")
        return data

    def encode_agg_share(self, agg: FieldVec) -> bytes:
        return agg.encode()

    def decode_agg_share(self, data: bytes) -> FieldVec:
        out = self.field.decode(data)
        if out.shape != (self.flp.OUTPUT_LEN,):
            raise ProtocolError(f"aggregate share must have {self.flp.OUTPUT_LEN} elements")
        return out

    def upload_size(self) -> int:
        """Bytes a client sends: public share plus every input share (and the nonce)."""
        s = self.xof.SEED_SIZE * self.SHARES if self.uses_joint_rand else 0
        return self.NONCE_SIZE + s + sum(self.input_share_size(j) for j in range(self.SHARES))


# --------------------------------------------------------------------------------------------
# variants (Section 7.4)


def prio3_count(shares: int) -> Prio3[int, int]:
    """Prio3Count: Field64, ``Count``, one proof, ID 1."""
    return Prio3(Flp(Count(Field64)), 0x00000001, shares, 1, "Prio3Count")


def prio3_sum(shares: int, max_measurement: int) -> Prio3[int, int]:
    """Prio3Sum: Field64, ``Sum(max_measurement)``, one proof, ID 2."""
    return Prio3(Flp(Sum(Field64, max_measurement)), 0x00000002, shares, 1, "Prio3Sum")


def prio3_sum_vec(
    shares: int, length: int, max_measurement: int, chunk_length: int
) -> Prio3[list[int], list[int]]:
    """Prio3SumVec: Field128, ``SumVec``, one proof, ID 3."""
    valid = SumVec(Field128, length, max_measurement, chunk_length)
    return Prio3(Flp(valid), 0x00000003, shares, 1, "Prio3SumVec")


def prio3_histogram(shares: int, length: int, chunk_length: int) -> Prio3[int, list[int]]:
    """Prio3Histogram: Field128, ``Histogram``, one proof, ID 4."""
    valid = Histogram(Field128, length, chunk_length)
    return Prio3(Flp(valid), 0x00000004, shares, 1, "Prio3Histogram")


def prio3_multihot_count_vec(
    shares: int, length: int, max_weight: int, chunk_length: int
) -> Prio3[list[bool], list[int]]:
    """Prio3MultihotCountVec: Field128, ``MultihotCountVec``, one proof, ID 5."""
    valid = MultihotCountVec(Field128, length, max_weight, chunk_length)
    return Prio3(Flp(valid), 0x00000005, shares, 1, "Prio3MultihotCountVec")


def prio3_sum_vec_multiproof(
    shares: int,
    field: type[FieldVec],
    proofs: int,
    length: int,
    max_measurement: int,
    chunk_length: int,
) -> Prio3[list[int], list[int]]:
    """SumVec with several proofs over any field, under the private-use ID ``0xFFFFFFFF`` (the
    draft repository's ``Prio3SumVecWithMultiproof`` test variant; draft Section 7.1.2)."""
    valid = SumVec(field, length, max_measurement, chunk_length)
    return Prio3(Flp(valid), 0xFFFFFFFF, shares, proofs, "Prio3SumVecWithMultiproof")


def prio3_higher_degree(shares: int) -> Prio3[int, int]:
    """The draft repository's degree-3 test variant (private-use ID ``0xFFFFFFFF``)."""
    return Prio3(Flp(HigherDegree()), 0xFFFFFFFF, shares, 1, "Prio3HigherDegree")


def recommended_chunk_length(measurement_length: int) -> int:
    """The chunk length near ``sqrt(MEAS_LEN)`` that the draft recommends (Section 7.4.3.1)."""
    return max(1, math.isqrt(max(1, measurement_length)))


__all__ = [
    "HelperShare",
    "InputShare",
    "LeaderShare",
    "Prio3",
    "VerifierShare",
    "VerifyState",
    "prio3_count",
    "prio3_higher_degree",
    "prio3_histogram",
    "prio3_multihot_count_vec",
    "prio3_sum",
    "prio3_sum_vec",
    "prio3_sum_vec_multiproof",
    "recommended_chunk_length",
]
