"""The peers' adapters. OpenDP and PipelineDP are in the ``dev`` extra (so these audits run in
CI, which installs it) and in ``bench``; diffprivlib is in no extra (see
:mod:`privhist.audit.peers`), so its audit is skipped where it is not installed. The adapters'
refusal of a missing peer is tested either way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from privhist.audit import CallableSampler, audit_statistical
from privhist.audit import peers as adapters
from privhist.core.errors import UnsupportedError

HAVE_OPENDP = importlib.util.find_spec("opendp") is not None
HAVE_PIPELINEDP = importlib.util.find_spec("pipeline_dp") is not None
HAVE_DIFFPRIVLIB = importlib.util.find_spec("diffprivlib") is not None


def test_available_matches_the_import_system() -> None:
    assert adapters.available() == {
        "opendp": HAVE_OPENDP,
        "pipeline_dp": HAVE_PIPELINEDP,
        "diffprivlib": HAVE_DIFFPRIVLIB,
    }


def test_a_missing_peer_is_refused_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        adapters, "available", lambda: {"opendp": False, "pipeline_dp": False, "diffprivlib": False}
    )
    with pytest.raises(UnsupportedError, match="not installed"):
        adapters.opendp_laplace_threshold(1.0, 1e-6)
    with pytest.raises(UnsupportedError, match="not installed"):
        adapters.pipelinedp_count(1.0, 1e-6)
    with pytest.raises(UnsupportedError, match="not installed"):
        adapters.diffprivlib_histogram(1.0)


@pytest.mark.skipif(not HAVE_OPENDP, reason="OpenDP is not installed (the dev extra has it)")
def test_opendp_threshold_2_scale_1_releases_more_than_its_map_states() -> None:
    """PEERS.md: at scale 1 and threshold 2 the map states delta 0.099 for d_in = 1, while one
    record is released with probability e^-1 / (1 + e^-1) = 0.269."""
    peer = adapters.opendp_laplace_threshold(1.0, 0.1, scale=1.0, threshold=2)
    assert peer.delta == pytest.approx(0.0989, abs=1e-3)
    res = audit_statistical(
        CallableSampler(peer.function, peer.name),
        peer.epsilon,
        peer.delta,
        samples=3000,
        pairs=peer.pairs[:1],
        confidence=0.9999,  # the bound stays below the true 0.269 but for 1 run in 10^4
    )
    assert res.violation
    assert 0.099 < res.result.delta_lower < 0.269


@pytest.mark.skipif(not HAVE_OPENDP, reason="OpenDP is not installed (the dev extra has it)")
def test_opendp_documented_calibration_and_its_exact_model() -> None:
    from privhist.audit.report import opendp_exact_model

    peer = adapters.opendp_laplace_threshold(1.0, 1e-6)
    assert peer.settings["scale"] == 1.0 and peer.delta <= 1e-6
    model = opendp_exact_model(peer)
    # the law's exact delta is e^(1/scale) times what the map states (PEERS.md)
    assert model.violation
    assert model.delta_needed / peer.delta == pytest.approx(2.718281828, rel=1e-6)


@pytest.mark.skipif(
    not HAVE_PIPELINEDP, reason="PipelineDP is not installed (the dev extra has it)"
)
def test_pipelinedp_count_passes_a_small_audit() -> None:
    peer = adapters.pipelinedp_count(1.0, 0.05)
    res = audit_statistical(
        CallableSampler(peer.function, peer.name),
        peer.epsilon,
        peer.delta,
        samples=1500,
        pairs=peer.pairs[:1],
        confidence=0.999,
    )
    assert not res.violation, res.verdict()


@pytest.mark.skipif(not HAVE_OPENDP, reason="OpenDP is not installed (the dev extra has it)")
def test_peers_report_is_written(tmp_path: Path) -> None:
    from privhist.audit.report import peers_report

    path, failures = peers_report(
        tmp_path,
        samples=2000,
        pilot=300,
        settings=[("opendp", 1.0, 0.1, {"scale": 1.0, "threshold": 2})],
    )
    text = path.read_text()
    assert "VIOLATION" in text and "then_laplace_threshold(scale=1.0, threshold=2)" in text
    assert len(failures) == 1


@pytest.mark.skipif(
    not HAVE_DIFFPRIVLIB,
    reason="diffprivlib is not installed (in no extra: see privhist.audit.peers)",
)
def test_diffprivlib_histogram_passes_a_small_audit() -> None:
    peer = adapters.diffprivlib_histogram(1.0)
    assert peer.function(["x", "x", "y", "z"]).keys() == {"x", "y"}  # the public domain only
    res = audit_statistical(
        CallableSampler(peer.function, peer.name),
        peer.epsilon,
        peer.delta,
        samples=1500,
        pairs=peer.pairs[:1],
        confidence=0.999,
    )
    assert not res.violation, res.verdict()
