"""The peer audits run in CI: the ``dev`` extra, which CI installs (``.ci/run``), names OpenDP and
PipelineDP, and where they are installed they import beside this environment's Polars and NumPy
(OpenDP's Polars plans need Polars 1, but the audits use its core ``make_count_by`` path only)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _names(requirements: list[str]) -> set[str]:
    return {
        re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements
    }


def test_the_dev_extra_installs_the_peers() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert {"opendp", "pipeline-dp"} <= _names(extras["dev"])
    assert "diffprivlib" not in _names(extras["dev"])  # it installs a top-level tests package


@pytest.mark.skipif(
    importlib.util.find_spec("opendp") is None or importlib.util.find_spec("pipeline_dp") is None,
    reason="the peers are not installed here (pip install -e '.[dev]')",
)
def test_the_peers_work_beside_this_polars() -> None:
    import numpy as np
    import pipeline_dp
    import polars as pl
    from opendp.mod import enable_features

    from privhist.audit import peers as adapters

    enable_features("contrib")
    peer = adapters.opendp_laplace_threshold(1.0, 1e-6)
    release = peer.function(["a"] * 50 + ["b"])
    assert set(release) <= {"a", "b"} and "a" in release
    assert pl.DataFrame({"x": np.arange(3)}).height == 3
    assert pipeline_dp.LocalBackend is not None
