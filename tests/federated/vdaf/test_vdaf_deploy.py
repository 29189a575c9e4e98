"""Two aggregators and a collector over gRPC on 127.0.0.1 with mutual TLS.

100 authenticated clients upload Prio3Histogram reports; 5 of them are malicious (a count of
1000 in one bucket, two buckets, no bucket, a bucket of -1 with two others, and a report whose
public share differs between the aggregators). The aggregators draw their noise from seeded
sources, so the test subtracts the very same noise and checks the counts exactly; the noise's
privacy is checked in test_vdaf_dp.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privhist.core.errors import ProtocolError, ValidationError
from privhist.core.random import SeededRandom
from privhist.federated.vdaf import tls
from privhist.federated.vdaf.deploy import (
    Channel,
    Helper,
    Leader,
    Task,
    collect,
    send_report,
    serve,
    upload,
)

KEY = bytes(range(32))
N = 100
B = 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tls.Credentials]:
    names = ["leader", "helper", "collector", "mallory"] + [f"client-{i}" for i in range(N + 2)]
    return tls.issue(tmp_path_factory.mktemp("pki"), names)


class Deployment:
    def __init__(self, task: Task, pki: dict[str, tls.Credentials], seeds: tuple[int, int]):
        self.task = task
        self.pki = pki
        self.helper = Helper(task, KEY, SeededRandom(seeds[1]))
        self.hserver, self.hport = serve(self.helper, pki["helper"])
        self.to_helper = Channel(f"127.0.0.1:{self.hport}", pki["leader"])
        self.leader = Leader(task, KEY, self.to_helper.call, SeededRandom(seeds[0]))
        self.lserver, self.lport = serve(self.leader, pki["leader"])

    def channels(self, who: str) -> tuple[Channel, Channel]:
        c = self.pki[who]
        return Channel(f"127.0.0.1:{self.lport}", c), Channel(f"127.0.0.1:{self.hport}", c)

    def close(self) -> None:
        self.to_helper.close()
        self.lserver.stop(0)
        self.hserver.stop(0)


@pytest.fixture
def deployment(pki: dict[str, tls.Credentials]) -> Iterator[Deployment]:
    d = Deployment(Task("t1", length=B, epsilon=1.0, min_batch_size=10), pki, (101, 202))
    yield d
    d.close()


def _bad_report(task: Task, kind: int, rng: SeededRandom) -> tuple[Any, ...]:
    vdaf = task.vdaf()
    enc = [0] * B  # kind 2: no bucket at all
    if kind == 0:
        enc[3] = 1000
    elif kind == 1:
        enc[1] = enc[2] = 1
    elif kind == 3:
        enc[0], enc[1], enc[2] = -1, 1, 1
    elif kind == 4:
        enc[4] = 1  # a valid vector, but its public share will differ between aggregators
    nonce = rng.uint64(2).tobytes()
    rand = rng.uint64(vdaf.RAND_SIZE // 8).tobytes()
    public, shares = vdaf.shard_encoded(task.ctx, vdaf.field.from_ints(enc), nonce, rand)
    return vdaf, nonce, public, shares


def test_one_hundred_clients_five_malicious(deployment: Deployment) -> None:
    task, rng = deployment.task, SeededRandom(7)
    truth = np.zeros(B, dtype=np.int64)
    for i in range(N):
        lead, help_ = deployment.channels(f"client-{i}")
        if i % 20 == 0:  # clients 0, 20, 40, 60, 80 are malicious
            vdaf, nonce, public, shares = _bad_report(task, i // 20, rng)
            if i // 20 == 4:  # a different public share to the helper
                bad_public = [bytes([public[0][0] ^ 1]) + public[0][1:], public[1]]
                send_report(vdaf, nonce, public, shares, lead, _Null())
                send_report(vdaf, nonce, bad_public, shares, _Null(), help_)
            else:
                send_report(vdaf, nonce, public, shares, lead, help_)
        else:
            bucket = (i * 7) % B
            truth[bucket] += 1
            upload(task, bucket, lead, help_, rng)
        lead.close()
        help_.close()
    lead, help_ = deployment.channels("collector")
    res = collect(task, lead, help_)
    assert res["reports"] == N - 5 and res["rejected"] == 5
    assert res["private"] is False  # seeded noise: marked as not private
    noise = task.noise_model()
    n_leader = noise.sample(B, SeededRandom(101))
    n_helper = noise.sample(B, SeededRandom(202))
    exact = np.array(res["counts"]) - n_leader - n_helper
    assert exact.tolist() == truth.tolist()
    assert res["buckets"] == list(range(B))
    # a second collection of the same batch is refused (each report is aggregated once)
    with pytest.raises(ProtocolError, match="already collected"):
        collect(task, lead, help_)


class _Null:
    """A channel that drops what it is sent (the report reaches one aggregator only)."""

    def call(self, method: str, payload: bytes) -> bytes:
        return b"{}"


def test_identities_come_from_certificates(
    deployment: Deployment, pki: dict[str, tls.Credentials], tmp_path: Path
) -> None:
    task, rng = deployment.task, SeededRandom(8)
    lead, help_ = deployment.channels("client-1")
    upload(task, 2, lead, help_, rng)
    with pytest.raises(ProtocolError, match="already uploaded"):
        upload(task, 3, lead, help_, rng)  # one report per authenticated client
    with pytest.raises(ProtocolError, match="PERMISSION_DENIED"):
        lead.call("Collect", b"{}")  # a client is not the collector
    with pytest.raises(ProtocolError, match="PERMISSION_DENIED"):
        help_.call("Verify", b'{"batch": "x", "items": []}')  # nor the leader
    m_lead, m_help = deployment.channels("mallory")
    with pytest.raises(ProtocolError, match="PERMISSION_DENIED"):
        upload(task, 1, m_lead, m_help, rng)  # not a client identity
    # a certificate from another authority is refused at the TLS handshake
    other = tls.issue(tmp_path / "other", ["collector"])["collector"]
    stranger = Channel(f"127.0.0.1:{deployment.lport}", other, timeout=2)
    with pytest.raises(ProtocolError, match=r"UNAVAILABLE|DEADLINE_EXCEEDED"):
        stranger.call("Collect", b"{}")
    for c in (lead, help_, m_lead, m_help, stranger):
        c.close()


def test_small_batches_are_refused(pki: dict[str, tls.Credentials]) -> None:
    d = Deployment(Task("t2", length=4, epsilon=1.0, min_batch_size=5), pki, (1, 2))
    try:
        rng = SeededRandom(9)
        for i in range(3):
            lead, help_ = d.channels(f"client-{i}")
            upload(d.task, i % 4, lead, help_, rng)
        lead, help_ = d.channels("collector")
        with pytest.raises(ProtocolError, match="fewer than 5"):
            collect(d.task, lead, help_)
    finally:
        d.close()


def test_threshold_keeps_only_large_noisy_counts(pki: dict[str, tls.Credentials]) -> None:
    d = Deployment(Task("t3", length=50, epsilon=2.0, min_batch_size=10), pki, (3, 4))
    try:
        rng = SeededRandom(10)
        for i in range(40):
            lead, help_ = d.channels(f"client-{i}")
            upload(d.task, 7 if i < 30 else 11, lead, help_, rng)
        lead, help_ = d.channels("collector")
        res = collect(d.task, lead, help_, threshold=12)
        assert 7 in res["buckets"]
        assert all(c >= 12 for c in res["counts"])
        assert len(res["buckets"]) < 50
    finally:
        d.close()


def test_task_files_are_validated(tmp_path: Path) -> None:
    t = Task("abc", length=8, epsilon=0.5)
    assert t.chunk_length == 2
    assert Task.from_dict(t.to_dict()) == t
    with pytest.raises(ValidationError):
        Task.from_dict({"task_id": "x", "length": 4, "epsilon": 1.0, "unknown": 1})
    with pytest.raises(ValidationError):
        Task("x", length=4, epsilon=-1.0)
    bad = tmp_path / "task.json"
    bad.write_text("not json")
    with pytest.raises(ValidationError):
        Task.load(bad)
