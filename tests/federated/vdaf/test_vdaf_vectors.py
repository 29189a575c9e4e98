"""Prio3 against the test vectors of draft-irtf-cfrg-vdaf-20.

The vector files are the draft's published data and are not kept in this repository. Two checks:

* always: every Prio3 vector's inputs are regular (``rand``, nonce and verification key are the
  bytes ``i % 256``, the context is ``b"some application"``), so each report is re-created here
  and the SHA-256 of our public shares, input shares, verifier shares and messages, output
  shares, aggregate shares and result (as the vector's JSON values) is compared with the digest
  of the same values taken from the draft's file (listed below). The ``bad_*`` vectors are
  re-created by the corruption the draft's generator describes and must be rejected.
* with ``PRIVHIST_VDAF_VECTORS`` set to the draft's ``test_vec/vdaf`` folder (git tag
  ``draft-irtf-cfrg-vdaf-20`` of cfrg/draft-irtf-cfrg-vdaf): every ``Prio3*.json`` file through
  :func:`privhist.federated.vdaf.vectors.check_file`, and mutated copies must fail.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from privhist.core.errors import ProtocolError
from privhist.federated.vdaf.field import FieldVec
from privhist.federated.vdaf.prio3 import HelperShare, LeaderShare, Prio3
from privhist.federated.vdaf.vectors import VARIANTS, check_file, run_vector

CTX = b"some application"

# name: (parameters, measurements, SHA-256 of the expected values in the draft's file)
DIGESTS: dict[str, tuple[dict[str, int], list[Any], str]] = {
    "Prio3Count_0": (
        {"shares": 2},
        [1],
        "40f5d69ab6542d210ae81afade3bb4513ea9015c484ad46d9da52e0c4f018994",
    ),
    "Prio3Count_1": (
        {"shares": 3},
        [1],
        "160dbc4e79ce2589e7beebc0e5b67744b2861725095123013a0f7698f7d8ef3d",
    ),
    "Prio3Count_2": (
        {"shares": 2},
        [0, 1, 1, 0, 1],
        "594b6385f5fb45b7df31600b2f92a14a4fa755d9036615e89de2576ecf0a8ef9",
    ),
    "Prio3Count_bad_gadget_poly": (
        {"shares": 2},
        [None],
        "d1eef7a7677dbbb1f3e5c8c43c4088179caec9f6c9ed8b097e83301295ef842d",
    ),
    "Prio3Count_bad_helper_seed": (
        {"shares": 2},
        [None],
        "9f48c347503f1659760cda9f9a02ce6ee872c6ee70db4cc804967dfb9cb9fb10",
    ),
    "Prio3Count_bad_meas_share": (
        {"shares": 2},
        [None],
        "9419ba71a207ce209963a3b03d8e102255eba86e0721872ce3e231a2c0c527d4",
    ),
    "Prio3Count_bad_wire_seed": (
        {"shares": 2},
        [None],
        "19b3d9145a35df858a31a1d69c5ba4def5120f1e86f04066abe5c1cdf6b94636",
    ),
    "Prio3HigherDegree_0": (
        {"shares": 2},
        [2],
        "ecdabe0fa603aa05915eb468ac53be50fa780a6d039dcbbc3dc9a8d6577389e3",
    ),
    "Prio3Histogram_0": (
        {"shares": 2, "length": 4, "chunk_length": 2},
        [2],
        "542828a37d1017fccb8d1cdcd9f2f5b1371fe908b4ef00d21861e1956d5312cd",
    ),
    "Prio3Histogram_1": (
        {"shares": 3, "length": 11, "chunk_length": 3},
        [2],
        "59c000fa845b0fd9dde8951719e61bdcfe32511d0e5c6ac72680b5b7cd33059f",
    ),
    "Prio3Histogram_2": (
        {"shares": 2, "length": 100, "chunk_length": 10},
        [2, 99, 99, 17, 42, 0, 0, 1, 2, 0],
        "3d2780fde02b27d5b385e72763e698e93b6a77ac1c672daf53ca1eeeba2d0fdf",
    ),
    "Prio3Histogram_bad_helper_jr_blind": (
        {"shares": 2, "length": 5, "chunk_length": 2},
        [None],
        "76926765fa6d9dcfcea7ddb4ae8dbc1f7369457bdc9b43ca46932c0219d32e81",
    ),
    "Prio3Histogram_bad_leader_jr_blind": (
        {"shares": 2, "length": 5, "chunk_length": 2},
        [None],
        "fb30ad8576202158f1488e535f1b2912b19a1bd5945c23befc5c6af9b6c13d81",
    ),
    "Prio3Histogram_bad_public_share": (
        {"shares": 2, "length": 5, "chunk_length": 2},
        [None],
        "ea79ea2c5ab2ff652449451d521f02a4b34f83b8663ca71682d8c1f4c8f71a8f",
    ),
    "Prio3Histogram_bad_verifier_message": (
        {"shares": 2, "length": 5, "chunk_length": 2},
        [None],
        "a24887dec9931a37c9cb7cecd7ddd0383db8fe1c2438d89e866fdd31394b5e4f",
    ),
    "Prio3MultihotCountVec_0": (
        {"shares": 2, "length": 4, "chunk_length": 2, "max_weight": 2},
        [[False, True, True, False]],
        "ea688d2f50a2fd1d2047a4d8e6f8545e2b1bb56f64fb172eff59ba4f45710ffd",
    ),
    "Prio3MultihotCountVec_1": (
        {"shares": 4, "length": 10, "chunk_length": 3, "max_weight": 2},
        [[False, True, False, False, False, False, False, False, False, True]],
        "c9fbad0904e203bb8e07c5f00fd16c460abed154b120c56df9cbfa1de1784784",
    ),
    "Prio3MultihotCountVec_2": (
        {"shares": 2, "length": 4, "chunk_length": 1, "max_weight": 4},
        [
            [False, True, True, False],
            [False, False, True, False],
            [False, False, False, False],
            [True, True, True, False],
            [True, True, True, True],
        ],
        "16c276570205b2b113b6c9c448182dcd95dcf6b6aff7e8111f526db0b347c1d2",
    ),
    "Prio3SumVecWithMultiproof_0": (
        {"shares": 2, "length": 10, "chunk_length": 9, "max_measurement": 255},
        [
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
            [255, 255, 255, 255, 255, 255, 255, 255, 255, 255],
        ],
        "c9c290a724271128e060fb2f7dd4a0fba0ca147daeacc64b49478500b9bbee30",
    ),
    "Prio3SumVecWithMultiproof_1": (
        {"shares": 3, "length": 3, "chunk_length": 7, "max_measurement": 65535},
        [[10000, 32000, 9], [19342, 19615, 3061], [15986, 24671, 23910]],
        "5f235cb24170c80adffc23d5b053c8072e723c629932d4dd8362a83a14a77c6b",
    ),
    "Prio3SumVec_0": (
        {"shares": 2, "length": 10, "chunk_length": 9, "max_measurement": 255},
        [
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
            [255, 255, 255, 255, 255, 255, 255, 255, 255, 255],
        ],
        "092c9ad8735d3d66311845df8a2a89fef2e51d87a539584dc21ae309aa1cac04",
    ),
    "Prio3SumVec_1": (
        {"shares": 3, "length": 3, "chunk_length": 7, "max_measurement": 32000},
        [[10000, 32000, 9], [19342, 19615, 3061], [15986, 24671, 23910]],
        "cd335a9f683deb97b08a5dfc25bffeb5e1b41a4cd300dd81ebcf170e165ff379",
    ),
    "Prio3Sum_0": (
        {"shares": 2, "max_measurement": 255},
        [100],
        "3c47fc98af8af712614bcfadd807e64591f4bd1b829ae202d207fc916a10873b",
    ),
    "Prio3Sum_1": (
        {"shares": 3, "max_measurement": 255},
        [100],
        "db481db017ace3e691c3eca53fdc91f13265b50ac1c4a48d0994bd4a148acab5",
    ),
    "Prio3Sum_2": (
        {"shares": 2, "max_measurement": 1337},
        [0, 1, 1337, 99, 42, 0, 0, 42],
        "fbed7e5a2281eaf27fc5d137ffeb2b233e054279aa728376288376161faad1a3",
    ),
}


def _rand(n: int) -> bytes:
    return bytes(i % 256 for i in range(n))


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _run_reports(vdaf: Prio3[Any, Any], measurements: list[Any]) -> dict[str, Any]:
    key = _rand(vdaf.VERIFY_KEY_SIZE)
    nonce = _rand(vdaf.NONCE_SIZE)
    reports = []
    aggs = [vdaf.agg_init() for _ in range(vdaf.SHARES)]
    for m in measurements:
        public, shares = vdaf.shard(CTX, m, nonce, _rand(vdaf.RAND_SIZE))
        states, vshares = [], []
        for j, share in enumerate(shares):
            st, vs = vdaf.verify_init(key, CTX, j, nonce, public, share)
            states.append(st)
            vshares.append(vs)
        msg = vdaf.verifier_shares_to_message(CTX, vshares)
        outs = [vdaf.verify_next(st, msg) for st in states]
        aggs = [vdaf.agg_update(a, o) for a, o in zip(aggs, outs, strict=True)]
        reports.append(
            [
                vdaf.encode_public_share(public).hex(),
                [vdaf.encode_input_share(s).hex() for s in shares],
                [[vdaf.encode_verifier_share(v).hex() for v in vshares]],
                [vdaf.encode_verifier_message(msg).hex()],
                [o.encode().hex() for o in outs],
            ]
        )
    return {
        "reports": reports,
        "agg_shares": [a.encode().hex() for a in aggs],
        "agg_result": vdaf.unshard(aggs, len(measurements)),
    }


GOOD = sorted(k for k in DIGESTS if "_bad_" not in k)


@pytest.mark.parametrize("name", GOOD)
def test_matches_the_drafts_vector(name: str) -> None:
    params, measurements, digest = DIGESTS[name]
    vdaf = VARIANTS[name.split("_")[0]](params)
    assert _digest(_run_reports(vdaf, measurements)) == digest


def _bump(v: FieldVec, index: int) -> FieldVec:
    w = v.copy()
    w[index] = v[index] + 1
    return w


def _flip(b: bytes) -> bytes:
    return bytes([b[0] ^ 1]) + b[1:]


def _corrupt(name: str, public: Any, shares: list[Any]) -> tuple[Any, list[Any]]:
    leader, helper = shares
    kind = name.split("_bad_")[1]
    if kind == "meas_share":
        leader = LeaderShare(_bump(leader.meas, 0), leader.proofs, leader.blind)
    elif kind == "wire_seed":
        leader = LeaderShare(leader.meas, _bump(leader.proofs, 0), leader.blind)
    elif kind == "gadget_poly":
        leader = LeaderShare(leader.meas, _bump(leader.proofs, -1), leader.blind)
    elif kind == "helper_seed":
        helper = HelperShare(_flip(helper.seed), helper.blind)
    elif kind == "leader_jr_blind":
        leader = LeaderShare(leader.meas, leader.proofs, _flip(leader.blind))
    elif kind == "helper_jr_blind":
        helper = HelperShare(helper.seed, _flip(helper.blind))
    elif kind == "public_share":
        public = [_flip(public[0]), *public[1:]]
    return public, [leader, helper]


BAD = sorted(k for k in DIGESTS if "_bad_" in k)


@pytest.mark.parametrize("name", BAD)
def test_bad_reports_of_the_draft_are_rejected(name: str) -> None:
    # the draft's generator: Prio3Count(2) with measurement 1, Prio3Histogram(2, 5, 2) with 3
    params, _, digest = DIGESTS[name]
    vdaf = VARIANTS[name.split("_")[0]](params)
    measurement = 1 if name.startswith("Prio3Count") else 3
    key, nonce = _rand(vdaf.VERIFY_KEY_SIZE), _rand(vdaf.NONCE_SIZE)
    public, shares = vdaf.shard(CTX, measurement, nonce, _rand(vdaf.RAND_SIZE))
    public, shares = _corrupt(name, public, shares)
    inits = [vdaf.verify_init(key, CTX, j, nonce, public, s) for j, s in enumerate(shares)]
    vshares = [vs for _, vs in inits]
    if name.endswith("bad_verifier_message"):
        bad = bytes(vdaf.xof.SEED_SIZE)
        with pytest.raises(ProtocolError, match="joint randomness"):
            vdaf.verify_next(inits[0][0], bad)
        seen = [[vdaf.encode_verifier_share(vshares[0]).hex()]], [bad.hex()]
    else:
        with pytest.raises(ProtocolError, match="proof verifier check failed"):
            vdaf.verifier_shares_to_message(CTX, vshares)
        seen = [[vdaf.encode_verifier_share(v).hex() for v in vshares]], []
    report = [
        vdaf.encode_public_share(public).hex(),
        [vdaf.encode_input_share(s).hex() for s in shares],
        seen[0],
        seen[1],
        [],
    ]
    assert _digest({"reports": [report], "agg_shares": [], "agg_result": None}) == digest


def test_a_wrong_digest_is_noticed() -> None:
    # power check: one changed measurement gives another digest
    params, measurements, digest = DIGESTS["Prio3Sum_0"]
    vdaf = VARIANTS["Prio3Sum"](params)
    assert _digest(_run_reports(vdaf, [measurements[0] + 1])) != digest


# -- the draft's files, where present -----------------------------------------------------------

VECTORS = os.environ.get("PRIVHIST_VDAF_VECTORS")


def _files() -> list[Path]:
    if not VECTORS or not Path(VECTORS).is_dir():
        return []
    return sorted(Path(VECTORS).glob("Prio3*.json"))


needs_files = pytest.mark.skipif(
    not _files(), reason="PRIVHIST_VDAF_VECTORS does not name the draft's test_vec/vdaf folder"
)


@needs_files
def test_every_prio3_file_passes() -> None:
    files = _files()
    assert len(files) >= 25
    results = [check_file(f) for f in files]
    assert [r.line() for r in results if not r.passed] == []
    assert {Path(r.path).stem for r in results} >= set(DIGESTS)


@needs_files
def test_mutated_files_fail() -> None:
    good = json.loads(Path(VECTORS or "", "Prio3Histogram_0.json").read_text())
    changed = copy.deepcopy(good)
    share = changed["reports"][0]["input_shares"][1]
    changed["reports"][0]["input_shares"][1] = ("0" if share[0] != "0" else "1") + share[1:]
    assert not run_vector(changed, "Prio3Histogram").passed
    bad = json.loads(Path(VECTORS or "", "Prio3Count_bad_meas_share.json").read_text())
    flipped = copy.deepcopy(bad)
    flipped["operations"][-1]["success"] = True
    assert not run_vector(flipped, "Prio3Count").passed
    assert run_vector(bad, "Prio3Count").passed
