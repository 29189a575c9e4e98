"""Start-up of the ``privhist`` command: ``--help`` and argument errors load no heavy module, the
mechanism catalogue the parsers are built from equals the live registry, and stub parsers carry
the same help lines as the full ones. (The time itself is measured by
``benchmarks/bench_startup.py``, never asserted here.)"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import privhist.mechanisms  # noqa: F401  (registers the built-in mechanisms)
import privhist.mechanisms.registry as registry
from privhist.cli import catalogue
from privhist.cli.main import _parser
from privhist.planning.plan import accepts_domain

SRC = str(Path(__file__).resolve().parents[2] / "src")
HEAVY = ("numpy", "scipy", "mpmath", "polars", "pyarrow", "privhist.mechanisms")

PROBE = """
import sys
from privhist.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] if not m.startswith("privhist") else m
                for m in sys.modules if m.startswith(%r)})
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def _heavy_after(*argv: str) -> list[str]:
    code = PROBE % (HEAVY,)
    out = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )
    line = [x for x in out.stderr.splitlines() if x.startswith("HEAVY:")]
    assert line, out.stderr
    return [m for m in line[-1][len("HEAVY:") :].split(",") if m]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["plan", "--help"],
        ["histogram"],
        ["plan", "stability", "--epsilon", "x"],
        ["quantiles"],
        ["audit", "exact", "nosuch"],
        ["budget", "init"],
        ["nosuchcommand"],
    ],
)
def test_help_and_argument_errors_load_nothing_heavy(argv: list[str]) -> None:
    assert _heavy_after(*argv) == []


def test_the_probe_sees_heavy_imports() -> None:
    # power check: a command that does run a mechanism is seen loading NumPy
    heavy = _heavy_after("plan", "stability", "--epsilon", "1", "--delta", "1e-6", "--json")
    assert "numpy" in heavy and "privhist.mechanisms" in heavy


def _entry(cls: Any) -> catalogue.Entry:
    return catalogue.Entry(
        (cls.__doc__ or cls.name).strip().splitlines()[0],
        needs_domain=bool(cls.needs_domain),
        takes_domain=accepts_domain(cls),
        options=tuple(
            catalogue.Spec(o.name, o.kind, o.default, o.help, o.choices, o.constraint)
            for o in cls.options
        ),
    )


def test_catalogue_equals_the_registry() -> None:
    import privhist.mechanisms.user_level  # noqa: F401  (registers the weighted selectors)

    live = {name: _entry(cls) for name, cls in registry.registry().items()}
    for name, entry in live.items():
        assert catalogue.MECHANISMS.get(name) == entry, (
            f"src/privhist/cli/catalogue.py is out of date for {name!r}; its entry is:\n"
            f"    {name!r}: {entry!r},"
        )
    assert set(catalogue.MECHANISMS) == set(live), "catalogue lists an unregistered mechanism"
    # registration order decides which mechanism names a shared option in --help
    assert list(catalogue.MECHANISMS) == list(live)
    weighted = {
        name: catalogue.Selector(
            (cls.__doc__ or name).strip().splitlines()[0], tuple(cls.constraints().items())
        )
        for name, cls in sorted(registry.weighted_registry().items())
    }
    for name, selector in weighted.items():
        assert catalogue.WEIGHTED.get(name) == selector, (
            f"src/privhist/cli/catalogue.py is out of date for {name!r}; its entry is:\n"
            f"    {name!r}: {selector!r},"
        )
    assert list(catalogue.WEIGHTED) == list(weighted), "catalogue lists an unregistered selector"
    from privhist.mechanisms.user_level.votes import VoteSelection

    first = (VoteSelection.__doc__ or "").strip().splitlines()[0]
    assert catalogue.VOTES == {VoteSelection.name: first}


def _sub(parser: argparse.ArgumentParser) -> Any:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_stubs_carry_the_full_help_lines() -> None:
    full, stub = _sub(_parser()), _sub(_parser(None))
    assert list(stub.choices) == list(full.choices)
    assert [(a.dest, a.help) for a in stub._choices_actions] == [
        (a.dest, a.help) for a in full._choices_actions
    ]


def test_the_selected_command_is_built_in_full() -> None:
    for name in ("histogram", "plan", "quantiles", "audit"):
        full = _sub(_parser()).choices[name]
        built = _sub(_parser(name)).choices[name]
        assert built.format_help() == full.format_help()
        stub = _sub(_parser(None)).choices[name]
        assert stub.format_help() != full.format_help()  # the stub has no options


def _constructor_default(cls: Any, name: str) -> Any:
    """The default of keyword ``name`` in the first ``__init__`` along the MRO that names it
    (keep-heavy passes the basic histogram's keywords on through ``**kwargs``)."""
    import inspect

    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        found = inspect.signature(init).parameters.get(name)
        if found is not None:
            return found.default
    raise AssertionError(f"no constructor of {cls.__name__} takes {name!r}")


def _default_mismatches(table: dict[str, catalogue.Entry], classes: dict[str, Any]) -> list[str]:
    out = []
    for name, entry in table.items():
        for spec in entry.options:
            built = _constructor_default(classes[name], spec.name)
            if built != spec.default or type(built) is not type(spec.default):
                out.append(f"{name}.{spec.name}: catalogue {spec.default!r}, constructor {built!r}")
    return out


def test_catalogue_defaults_are_the_constructor_defaults() -> None:
    # what --help and the docs state as a default is what the constructor uses when not given
    classes = registry.registry()
    assert _default_mismatches(catalogue.MECHANISMS, classes) == []
    # power check: the count bound of the basic histograms (2**20) listed for sparse is caught
    wrong = dict(catalogue.MECHANISMS)
    wrong["sparse"] = wrong["sparse"]._replace(
        options=tuple(
            s._replace(default=1 << 20) if s.name == "count_bound" else s
            for s in wrong["sparse"].options
        )
    )
    assert _default_mismatches(wrong, classes) == [
        "sparse.count_bound: catalogue 1048576, constructor 1000"
    ]
