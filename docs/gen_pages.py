"""Pages generated from the code: one per registered mechanism, the CLI reference, the API
reference, and the expansion of the papers' reproduction markers.

The mkdocs hook (``docs/hooks.py``) adds these pages to the site at build time, and the docs tests
(``tests/docs/``) run their examples and check their links, so a new mechanism, command, option or
subpackage appears in the documentation without anyone editing a page.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import inspect
import io
import json
import os
import pkgutil
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent

# the privacy parameters every mechanism page uses for its guarantee, curve and example
EPSILON = "1"
DELTA = "1e-8"
LARGEST_COUNT = 400


def _ensure_importable() -> None:
    """Put this checkout's ``src/`` first, so the pages describe this checkout's code."""
    src = str(REPO / "src")
    if src not in sys.path:
        sys.path.insert(0, src)


# -- mechanisms ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MechanismInfo:
    """What a mechanism page is made of, read from the registry."""

    name: str
    cls: type[Any]
    weighted: bool

    @property
    def path(self) -> str:
        return f"mechanisms/{self.name}.md"

    @property
    def figure(self) -> str:
        return f"mechanisms/figures/{self.name}.png"

    @property
    def qualified(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__name__}"

    @property
    def requires_delta(self) -> bool:
        return bool(getattr(self.cls, "requires_delta", True))

    def plan_arguments(self, largest_count: int) -> list[str]:
        """``plan NAME --epsilon 1 [--delta 1e-8] --max-count N``: delta is given wherever the
        planner takes it (a pure-DP mechanism then reports delta 0; some need delta > 0 for
        large universes even though they can be pure)."""
        args = ["plan", self.name, "--epsilon", EPSILON]
        if "--delta" in plan_flags(self.name):
            args += ["--delta", DELTA]
        return [*args, "--max-count", str(largest_count)]


def plan_flags(name: str) -> set[str]:
    """The flags of ``privhist plan NAME`` (empty when there is no such planner)."""
    sub = dict(_children(dict(_children(_parser()))["plan"])).get(name)
    return set() if sub is None else {f for a in sub._actions for f in a.option_strings}


@functools.cache
def _mechanisms() -> tuple[MechanismInfo, ...]:
    """Every registered mechanism: the ``Counts`` mechanisms, then the weighted selectors."""
    _ensure_importable()
    import privhist.mechanisms
    import privhist.mechanisms.user_level  # noqa: F401
    from privhist.mechanisms import registry

    out = [MechanismInfo(n, c, False) for n, c in sorted(registry.registry().items())]
    out += [MechanismInfo(n, c, True) for n, c in sorted(registry.weighted_registry().items())]
    return tuple(out)


def mechanisms() -> list[MechanismInfo]:
    """Every registered mechanism: the ``Counts`` mechanisms, then the weighted selectors."""
    return list(_mechanisms())


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """Run ``privhist ARGS`` in this process; its exit status, standard output and error."""
    _ensure_importable()
    from privhist.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(args)
        except SystemExit as stop:  # argparse's own errors
            status = stop.code if isinstance(stop.code, int) else 1
    return status, out.getvalue(), err.getvalue()


@functools.cache
def plan_json(info: MechanismInfo, largest_count: int = LARGEST_COUNT) -> dict[str, Any] | None:
    """``privhist plan NAME ... --json`` for the page's parameters (None without a planner).
    Cached: the page and its figure use the same plan."""
    if info.name not in subcommands(["plan"]):
        return None
    args = [*info.plan_arguments(largest_count), "--json"]
    status, text, error = run_cli(args)
    if status != 0:
        raise RuntimeError(
            f"the page of mechanism {info.name!r} runs `privhist {' '.join(args)}`, which failed "
            f"(status {status}): {error.strip()}"
        )
    result: dict[str, Any] = json.loads(text)
    return result


def has_curve(plan: dict[str, Any] | None) -> bool:
    """Whether the plan gives a per-key reporting curve (a mechanism whose release of a key
    depends on the other keys reports NaN)."""
    if plan is None:
        return False
    return any(p == p for p in plan["reporting_probability"])  # p != p: NaN


def curve_extent(curve: list[float]) -> int:
    """The largest count the figure and the example show: a little past Pr[released] >= 0.999."""
    first = next((i for i, p in enumerate(curve) if p >= 0.999), None)
    if first is None:
        return min(100, len(curve) - 1)
    return min(len(curve) - 1, max(20, int(first * 1.25) + 2))


def plan_figure(info: MechanismInfo, plan: dict[str, Any]) -> bytes:
    """The reporting curve of ``plan`` as a PNG (probability that a key is released, by its
    true count)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = plan["reporting_probability"]
    extent = curve_extent(curve)
    unit = "users holding the key" if info.weighted else "true count of the key"
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.step(range(extent + 1), curve[: extent + 1], where="mid", linewidth=2)
    ax.set_xlabel(unit)
    ax.set_ylabel("Pr[released]")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"{info.name}: {plan.get('guarantee', '')}", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _options_table(info: MechanismInfo) -> list[str]:
    options = getattr(info.cls, "options", None)
    if options:
        rows = [
            "| option (Python) | flag | type | default | accepts | meaning |",
            "|---|---|---|---|---|---|",
        ]
        for o in options:
            kind = "flag" if o.kind is bool else o.kind.__name__
            if o.choices:
                kind += ": " + ", ".join(f"`{c}`" for c in o.choices)
            accepts = f"`{o.constraint.expected(note=False)}`" if o.constraint else ""
            rows.append(
                f"| `{o.name}` | `{o.flag}` | {kind} | `{o.default!r}` | {accepts} | "
                f"{_cell(o.help)} |"
            )
        return rows
    params = [
        p
        for p in inspect.signature(info.cls.__init__).parameters.values()
        if p.name not in ("self", "epsilon", "delta") and p.kind is not p.VAR_KEYWORD
    ]
    if not params:
        return ["It has no options beyond epsilon and delta."]
    rows = ["| parameter (Python) | default |", "|---|---|"]
    for p in params:
        default = "required" if p.default is p.empty else f"`{p.default!r}`"
        rows.append(f"| `{p.name}` | {default} |")
    return rows


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _doctest_example(cls: type[Any]) -> str | None:
    """Every ``>>>`` example of the class docstring, as one ``pycon`` block (run by the docs
    tests with doctest, so its printed outputs are checked too)."""
    import doctest

    examples = doctest.DocTestParser().get_examples(inspect.getdoc(cls) or "")
    if not examples:
        return None
    # the docstring runs with its module's names; the page imports the ones it uses
    lines = [">>> " + line for line in _imports_for(cls, [e.source for e in examples])]
    for example in examples:
        source = example.source.rstrip("\n").split("\n")
        lines.append(">>> " + source[0])
        lines += ["... " + line for line in source[1:]]
        lines += example.want.rstrip("\n").split("\n") if example.want else []
    return "\n".join(lines)


def _imports_for(cls: type[Any], sources: list[str]) -> list[str]:
    """Import statements for the names ``sources`` take from ``cls``'s module."""
    import ast
    import builtins

    used: list[str] = []
    bound: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store):
                    bound.add(node.id)
                elif node.id not in used:
                    used.append(node.id)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
    namespace = vars(sys.modules[cls.__module__])
    out = []
    for name in used:
        if name in bound or hasattr(builtins, name) or name not in namespace:
            continue
        value = namespace[name]
        if inspect.ismodule(value):
            module = value.__name__
            out.append(f"import {module}" if module == name else f"import {module} as {name}")
        else:
            home = getattr(value, "__module__", None) or cls.__module__
            if getattr(sys.modules.get(home), name, None) is not value:
                home = cls.__module__
            out.append(f"from {home} import {name}")
    return out


_SECTION = re.compile(r"^(Args|Arguments|Attributes|Returns|Raises|Examples?|Note|Notes):\s*$")


def _class_prose(cls: type[Any]) -> str:
    """The class docstring up to its example or its first Google section, as Markdown."""
    _ensure_importable()
    sys.path.insert(0, str(DOCS))
    try:
        from griffe_docstrings import rewrite
    finally:
        sys.path.remove(str(DOCS))
    kept = []
    for line in (inspect.getdoc(cls) or "").splitlines():
        if line.lstrip().startswith(">>>") or _SECTION.match(line.strip()):
            break
        kept.append(line)
    return rewrite("\n".join(kept).strip())


def _module_summary(cls: type[Any]) -> str:
    doc = (sys.modules[cls.__module__].__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ")


def mechanism_page(info: MechanismInfo, plan: dict[str, Any] | None) -> str:
    """The page of one mechanism (summary, paper, guarantee, options, curve, example)."""
    cls = info.cls
    kind = (
        "a weighted user-level selector: it releases from a `WeightedSource` (per-key sums of "
        "the weights each user spreads over its keys), with `release_weighted(source, rng)`"
        if info.weighted
        else "a `Counts` mechanism: it releases aggregated per-key counts with "
        "`release(counts, rng)`, and `privhist histogram --mechanism` selects it"
    )
    lines = [
        f"# `{info.name}`",
        "",
        f"**{_cell(getattr(cls, 'summary', '') or cls.__name__)}**",
        "",
        f"Class `{info.qualified}`; {kind}.",
        "",
        "## Paper and section",
        "",
        _module_summary(cls),
        "",
        _class_prose(cls),
        "",
        f"Full reference: [`{info.cls.__name__}`][{info.qualified}].",
        "",
        "## Guarantee",
        "",
    ]
    facts = []
    if not info.weighted:
        facts.append(
            "sparse: releases only keys present in the data"
            if getattr(cls, "sparse", True)
            else "dense: releases every key of a public domain"
        )
        if getattr(cls, "needs_domain", False):
            facts.append("needs a public domain (`--domain`)")
    facts.append(
        "approximate DP: needs delta > 0"
        if info.requires_delta
        else "can be pure DP (delta = 0), where its options allow"
    )
    lines += [f"- {f}" for f in facts]
    if plan is not None:
        lines += [
            "",
            f"`privhist {' '.join(info.plan_arguments(LARGEST_COUNT)[:-2])}` reports:",
            "",
            f"- guarantee: {_cell(str(plan.get('guarantee', '')))}",
        ]
        params = plan.get("parameters")
        if isinstance(params, dict) and params:
            lines += ["", "| parameter | value |", "|---|---|"]
            for key, value in params.items():
                lines.append(f"| `{key}` | `{_cell(json.dumps(value))[:80]}` |")
    lines += ["", "## Options", "", *_options_table(info), ""]
    if has_curve(plan):
        assert plan is not None
        lines += [
            "## Reporting curve",
            "",
            "The probability that a key is released, by "
            + ("the number of users holding it" if info.weighted else "its true count")
            + " (computed by the mechanism's planner, before any data is read):",
            "",
            f"![reporting curve of {info.name}](figures/{info.name}.png)",
            "",
        ]
    elif plan is not None:
        lines += [
            "## Reporting curve",
            "",
            "The planner gives no per-key curve for this mechanism: whether a key is released "
            "depends on the other keys' counts too, so `privhist plan` prints `nan`.",
            "",
        ]
    lines += ["## Examples", ""]
    if plan is not None:
        curve = plan["reporting_probability"]
        extent = curve_extent(curve) if has_curve(plan) else 20
        lines += [
            "The planner's report from the command line:",
            "",
            "```bash",
            "privhist " + " ".join(info.plan_arguments(extent)),
            "```",
            "",
        ]
    example = _doctest_example(cls)
    if example is not None:
        lines += ["From Python (the docstring's example):", "", "```pycon", example, "```", ""]
    return "\n".join(lines)


def mechanism_index(infos: list[MechanismInfo]) -> str:
    lines = [
        "# Mechanisms",
        "",
        "Every mechanism registered in `privhist.mechanisms.registry` has a page here, generated "
        "from the registry when the site is built. A mechanism is constructed from (epsilon, "
        "delta) and public bounds only, never from data; `privhist plan NAME` shows what it "
        "will release before any data is read. The default (`--mechanism default`) is the most "
        "accurate applicable one as `privhist.planning.plan` ranks them.",
        "",
        f"| mechanism | what it releases | guarantee (`privhist plan` at epsilon = {EPSILON}, "
        f"delta = {DELTA}) |",
        "|---|---|---|",
    ]
    for info in infos:
        plan = plan_json(info)
        stated = str(plan.get("guarantee", "")) if plan else ""
        pure = ", 0)-DP" in stated if stated else not info.requires_delta
        guarantee = "pure epsilon-DP" if pure else "(epsilon, delta)"
        summary = _cell(getattr(info.cls, "summary", "") or info.cls.__name__)
        lines.append(f"| [`{info.name}`]({info.name}.md) | {summary} | {guarantee} |")
    return "\n".join(lines) + "\n"


# -- command line --------------------------------------------------------------------------------


@functools.cache
def _parser() -> argparse.ArgumentParser:
    _ensure_importable()
    from privhist.cli import main as cli_main

    return cli_main._parser()


def _children(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, sub


def subcommands(path: list[str]) -> list[str]:
    """The names of the sub-commands under ``privhist PATH...``."""
    parser = _parser()
    for name in path:
        parser = dict(_children(parser))[name]
    return [name for name, _ in _children(parser)]


def commands() -> list[list[str]]:
    """Every command path, depth first (``[]`` is ``privhist`` itself)."""
    out: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        out.append(path)
        for name, sub in _children(parser):
            walk(sub, [*path, name])

    walk(_parser(), [])
    return out


def cli_page() -> str:
    """The CLI reference: every command's ``--help``, generated from the argparse parsers."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        lines = [
            "# Command line reference",
            "",
            "Generated from the argparse parsers of `privhist.cli.main` when the site is built: "
            "every command and sub-command, with its `--help`. Every error prints one line "
            "`privhist: error: ...` and exits with status 2 (`--debug` shows the traceback).",
            "",
        ]

        def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
            depth = min(len(path) + 1, 4)
            title = "privhist " + " ".join(path) if path else "privhist"
            lines.extend([f"{'#' * depth} `{title.strip()}`", "", "```text"])
            lines.append(parser.format_help().rstrip())
            lines.extend(["```", ""])
            for name, sub in _children(parser):
                walk(sub, [*path, name])

        walk(_parser(), [])
        return "\n".join(lines)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# -- Python API ----------------------------------------------------------------------------------


def api_packages() -> list[str]:
    """``privhist`` and each of its subpackages and modules (``__main__`` and the CLI
    internals excepted: the command line has its own reference)."""
    _ensure_importable()
    import privhist

    names = [m.name for m in pkgutil.iter_modules(privhist.__path__) if not m.name.startswith("_")]
    return ["privhist", *(f"privhist.{n}" for n in sorted(names) if n != "cli")]


def _submodules(package: str) -> list[str]:
    module = importlib.import_module(package)
    if not hasattr(module, "__path__"):
        return []
    out = []
    for m in pkgutil.walk_packages(module.__path__, package + "."):
        if any(part.startswith("_") for part in m.name.split(".")[1:]):
            continue
        out.append(m.name)
    return sorted(out)


def _own_members(package: str) -> list[str]:
    """The public names a package's ``__init__`` defines itself (its re-exports are documented
    in the modules that define them)."""
    module = importlib.import_module(package)
    if not hasattr(module, "__path__"):
        return []
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == package
    ]


def api_page(package: str) -> str:
    lines = [f"# `{package}`", ""]
    if package == "privhist":
        lines += [
            "The names exported at the top level. Each subpackage has its own page.",
            "",
            "::: privhist",
            "    options:",
            "      show_root_heading: false",
            "      show_submodules: false",
            "",
        ]
        return "\n".join(lines)
    own = _own_members(package)
    lines += [f"::: {package}", "    options:", "      show_root_heading: false"]
    lines += [f"      members: [{', '.join(own)}]" if own else "      members: false", ""]
    for sub in _submodules(package):
        lines += [f"::: {sub}", ""]
    return "\n".join(lines)


def api_path(package: str) -> str:
    return f"reference/api/{package}.md"


def api_index() -> str:
    lines = [
        "# Python API",
        "",
        "Generated from the docstrings (mkdocstrings) when the site is built; one page per "
        "subpackage of `privhist`. Docstring examples are run by the test suite as doctests.",
        "",
    ]
    for package in api_packages():
        doc = (importlib.import_module(package).__doc__ or "").strip().split("\n\n")[0]
        lines.append(f"- [`{package}`]({package}.md): {' '.join(doc.split())}")
    return "\n".join(lines) + "\n"


# -- all generated markdown ----------------------------------------------------------------------


def generated_markdown(with_plans: bool = True) -> dict[str, str]:
    """Every generated page, by its path in the site's docs tree."""
    infos = mechanisms()
    pages = {"mechanisms/index.md": mechanism_index(infos)}
    for info in infos:
        pages[info.path] = mechanism_page(info, plan_json(info) if with_plans else None)
    pages["reference/cli.md"] = cli_page()
    pages["reference/api/index.md"] = api_index()
    for package in api_packages():
        pages[api_path(package)] = api_page(package)
    return pages


def generated_figures() -> dict[str, bytes]:
    """The mechanisms' reporting curves, by their path in the site."""
    out = {}
    for info in mechanisms():
        plan = plan_json(info)
        if has_curve(plan):
            assert plan is not None
            out[info.figure] = plan_figure(info, plan)
    return out


def nav_additions() -> dict[str, list[Any]]:
    """Nav entries for the generated pages, by the section they belong to."""
    return {
        "Mechanisms": [{info.name: info.path} for info in mechanisms()],
        "Python API": [{p: api_path(p)} for p in api_packages()],
    }


EXPERIMENT_MARKER = re.compile(r"<!--\s*experiment:\s*([\w-]+)\s*-->")


def figure_path(experiment: str, file: str) -> str:
    return f"reproductions/figures/{experiment}/{file}"


def expand_experiments(markdown: str, outputs: dict[str, Path]) -> str:
    """Replace each ``<!-- experiment: NAME -->`` marker by that experiment's generated
    ``summary.md`` (headings one level down) and its figures."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in outputs:
            raise KeyError(f"no experiment named {name!r}; known: {sorted(outputs)}")
        directory = outputs[name]
        summary = (directory / "summary.md").read_text(encoding="utf-8")
        summary = re.sub(r"^(#+) ", r"#\1 ", summary, flags=re.M)
        parts = [summary.rstrip(), "", "### Figures of this run", ""]
        for png in sorted(directory.glob("*.png")):
            parts += [f"![{name}: {png.stem}](figures/{name}/{png.name})", ""]
        return "\n".join(parts)

    return EXPERIMENT_MARKER.sub(one, markdown)


OUTPUT_MARKER = re.compile(r"<!--\s*output:\s*privhist\s+(.*?)\s*-->")


def expand_outputs(markdown: str) -> str:
    """Replace each ``<!-- output: privhist ARGS -->`` marker by what ``privhist ARGS`` prints
    now, as a ``text`` block, so that a page shows a command's real output (run at build time,
    in this process; a command that fails stops the build)."""

    def one(match: re.Match[str]) -> str:
        args = shlex.split(match.group(1))
        status, out, err = run_cli(args)
        if status != 0:
            raise RuntimeError(f"`privhist {match.group(1)}` failed ({status}): {err.strip()}")
        return "```text\n" + out.rstrip("\n") + "\n```"

    return OUTPUT_MARKER.sub(one, markdown)
