"""Every optional extra is checked by CI in a fresh environment with a run of its feature
(``.ci/extras.sh``, called by ``.ci/run``), and declares what that feature imports."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
SCRIPT = (ROOT / ".ci" / "extras.sh").read_text()


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[;! ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_ci_checks_every_extra_with_a_run_of_its_feature() -> None:
    default = re.search(r"\|\| names=\((.*?)\)", SCRIPT)
    assert default is not None
    checked = set(default.group(1).split())
    assert checked == (set(EXTRAS) - {"dev"}) | {"core"}
    for name in checked:
        assert re.search(rf"^run_{name}\(\) \{{", SCRIPT, re.M), name
    assert ".ci/extras.sh" in (ROOT / ".ci" / "run").read_text()


def test_extras_declare_what_their_feature_needs() -> None:
    # PySpark's Arrow exchange (the Spark engine's draws) needs pandas >= 2.2 and pyarrow
    for extra in ("spark", "bench"):
        names = _names(EXTRAS[extra])
        assert {"pyspark", "pandas", "pyarrow"} <= names, extra
        assert any(r.replace(" ", "").startswith("pandas>=2.2") for r in EXTRAS[extra])
    assert {"opendp", "pipeline-dp"} <= _names(EXTRAS["bench"])
    assert "grpcio" in _names(EXTRAS["federated"])
    assert "matplotlib" in _names(EXTRAS["plot"])
    assert {"pandas", "pyarrow"} <= _names(EXTRAS["pandas"])  # Polars reads pandas through Arrow
    # the development extra holds every other extra's packages
    everything = set().union(*(_names(v) for k, v in EXTRAS.items() if k != "dev"))
    assert everything <= _names(EXTRAS["dev"]) | {"opendp", "pipeline-dp"}
