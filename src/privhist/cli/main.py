"""The ``privhist`` command: ``histogram``, ``plan``, ``demo`` (``budget`` and the others are in
:mod:`privhist.cli.commands`).

Every failure prints one line ``privhist: error: ...`` to stderr and exits non-zero (``--debug``
shows the traceback). Releases go to ``--output`` (written atomically) or to stdout as CSV; the
summary goes to stderr.

Start-up: this module and the parsers import no NumPy and no mechanism. The parsers are built from
:mod:`privhist.cli.catalogue` (names and options of the registered mechanisms) and from light
command and planner modules; each command imports what it needs when it runs, so
``privhist --help`` and an argument error answer at Python's start-up cost
(``benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from privhist.cli import catalogue
from privhist.core.errors import MissingInputError, PrivhistError, ValidationError

if TYPE_CHECKING:
    from privhist.core.neighbouring import Neighbouring

EXIT_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(_selected_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        result: int = args.run(args)
        return result
    except BrokenPipeError:  # e.g. `privhist plan ... | head`: the reader left, not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (PrivhistError, OSError) as exc:
        if args.debug:
            traceback.print_exc()
        text = _as_flag(_as_command(exc, args), _command(parser, args))
        print(f"privhist: error: {_one_line(text)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("privhist: interrupted", file=sys.stderr)
        return 130


def _as_command(exc: BaseException, args: argparse.Namespace) -> BaseException:
    """A mechanism's error names its class (``StabilityHistogram``); on the command line it names
    the command that built it instead (``histogram --mechanism stability``, ``plan stability``).
    An error a Session method labelled (``Session.histogram with mechanism stability``) names the
    command and the mechanism flag instead (``histogram --mechanism stability``)."""
    registry = sys.modules.get("privhist.mechanisms.registry")
    command = getattr(args, "command", None)
    if not isinstance(exc, ValidationError) or not command:
        return exc
    if exc.function.startswith("Session."):
        # the Session's label names the method and the mechanism: on the command line, the
        # command and the mechanism flag ("histogram --mechanism stability")
        _, _, mechanism = exc.function.partition(" with mechanism ")
        where = f"{command} --mechanism {mechanism}" if mechanism else command
        return ValidationError(exc.parameter, where, exc.expected, exc.got)
    if registry is None:
        return exc
    known = {**registry.registry(), **registry.weighted_registry()}
    names = [n for n, cls in known.items() if cls.__name__ == exc.function]
    if not names:
        return exc
    sub = getattr(args, "audit_command", None)  # audit exact MECHANISM, audit sample --mechanism
    prefix = f"{command} {sub}" if sub else command
    positional = command == "plan" or sub == "exact"
    where = f"{prefix} {names[0]}" if positional else f"{prefix} --mechanism {names[0]}"
    return ValidationError(exc.parameter, where, exc.expected, exc.got)


#: Session parameters the command line gives through a flag of another name (named so where the
#: command has that flag): the ends of quantiles' and range's ``--range LO HI``, range's
#: ``--query A B`` (repeated), aggregate's ``--metric`` and ``--weight`` (repeated), and the
#: ``--format`` of a written release
SPELLED = {
    "lower": "--range",
    "upper": "--range",
    "queries": "--query",
    "metrics": "--metric",
    "weights": "--weight",
    "output_format": "--format",
}


def _as_flag(exc: BaseException, parser: argparse.ArgumentParser) -> str:
    """The error's text; a library error naming a Python parameter (``max_partitions``) that the
    command line spells as a flag also names the flag (``'max_partitions' (--max-partitions)``;
    ``'upper' (--range)`` for the parameters of :data:`SPELLED`)."""
    text = str(exc) or type(exc).__name__
    if not isinstance(exc, ValidationError | MissingInputError) or exc.parameter.startswith("-"):
        return text
    flag = SPELLED.get(exc.parameter, "--" + exc.parameter.replace("_", "-"))
    if flag not in _flags(parser):
        return text
    named = f"parameter '{exc.parameter}'"
    text = text.replace(named, f"{named} ({flag})", 1)
    # other parameters named in the expectation ("without domain_from_data") as flags too
    flags = _flags(parser)
    said = exc.expected if isinstance(exc, ValidationError) else exc.must
    expected = said
    for word in set(re.findall(r"(?<![\w'-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", expected)):
        if "--" + word.replace("_", "-") in flags:
            expected = re.sub(rf"(?<![\w'-]){word}\b", "--" + word.replace("_", "-"), expected)
    return text.replace(said, expected, 1)


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The sub-parser of the command that ran (its flags name the parameters)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(getattr(args, "command", None) or "")
            if isinstance(sub, argparse.ArgumentParser):
                return sub
    return parser


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    out = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _flags(sub)
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- parser ----------------------------------------------------------------------------------


def _help_line(doc: str) -> str:
    """The first line of a docstring as a command's one-line help: without its reST markup
    (``x``, :role:`~a.b`), without a leading ``privhist plan NAME``: (the command is already
    named), and marked as cut when the sentence goes on."""
    line = doc.strip().splitlines()[0] if doc.strip() else ""
    line = re.sub(r":\w+:`~?(?:[\w.]+\.)?([^`]+)`", r"\1", line).replace("``", "")
    line = re.sub(r"^privhist plan [\w-]+:\s*", "", line)
    line = line.rstrip()
    return line if line.endswith((".", ")", ":")) or not line else f"{line} ..."


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, like every other privhist error, and no abbreviated
    options: ``plan aggregate --user u`` would otherwise be read as ``--user-level`` and fail
    on ``u``, and a new option could silently change what an abbreviation meant."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # a negative number in exponent form ("--delta -1e-6") is a value, so that the option
        # refuses it by name, not "expected one argument"
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")

    def error(self, message: str) -> Any:
        self.exit(EXIT_ERROR, f"privhist: error: {' '.join(message.split())}\n")


def _selected_command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv``: its first token that is not an option (the top-level options,
    ``--debug`` and ``-h``, take no value), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


class _HelpLine(Exception):
    """Raised by :class:`_StubSubparsers` once a plug-in has named its command."""


class _StubSubparsers:
    """Stands in for the sub-parsers while a plug-in's ``register`` runs for a command that is not
    being run: its first ``add_parser`` adds a parser with only the name and help line, then
    stops ``register``. So ``privhist --help`` lists every command, and a command's own options
    (and what building them imports) are built only when that command runs."""

    def __init__(self, sub: Any) -> None:
        self.sub = sub

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        self.sub.add_parser(name, help=kwargs.get("help"))
        raise _HelpLine


def _parser(selected: str | None = "*") -> argparse.ArgumentParser:
    """The ``privhist`` parser. Commands other than ``selected`` get a stub with their help line
    only; ``"*"`` (the default) builds every command in full."""
    p = _Parser(
        prog="privhist",
        description="Differentially private histograms with exact noise and a budget ledger.",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    builders = [_histogram_parser, _plan_parsers, _demo_parser]
    builders += [m.register for m in _plugins("privhist.cli.commands")]
    for register in builders:
        if selected == "*":
            register(sub)
            continue
        before = set(sub.choices)
        try:
            register(_StubSubparsers(sub))
        except _HelpLine:
            pass
        if selected in set(sub.choices) - before:  # the command being run: build it in full
            del sub.choices[selected]
            sub._choices_actions = [a for a in sub._choices_actions if a.dest != selected]
            register(sub)
    return p


def _histogram_parser(sub: Any) -> None:
    from privhist.cli.common import (
        INPUT_FORMAT_HELP,
        LEDGER_HELP,
        add_dry_run_arguments,
        add_engine_arguments,
        add_layout_arguments,
    )

    h = sub.add_parser("histogram", help="release a private histogram of a column")
    h.add_argument("input", help="CSV, Parquet, NDJSON, text (.txt[.gz]) or FIMI (.dat) file")
    h.add_argument("--key", help="key column (not needed for --text or FIMI input)")
    h.add_argument(
        "--user",
        nargs="?",
        const=True,
        help="user (privacy unit) column: enables user-level DP; for text input without a "
        "value, each line is a user (FIMI input: each basket is always a user)",
    )
    h.add_argument(
        "--key-type",
        choices=["str", "int"],
        default=None,
        help="how keys are read (public choice, never inferred from the data): str (default; "
        "FIMI: int); a value that is not an integer under int counts as a null key",
    )
    h.add_argument("--text", action="store_true", help="input is plain text: count words")
    h.add_argument(
        "--input-format",
        choices=["csv", "tsv", "parquet", "ndjson", "text", "fimi"],
        help=INPUT_FORMAT_HELP,
    )
    h.add_argument(
        "--mechanism",
        choices=["default", *catalogue.names(), *catalogue.WEIGHTED, *catalogue.VOTES],
        default="default",
        help="a registered mechanism, a weighted user-level selector (wgm, dp-sips, "
        "cumulative-sips), or vote-selection (user-level: one vote per user, no cap); default "
        "on user-level data: the key selectors' plan (--dry-run explains its choice)",
    )
    _privacy_args(h)
    h.add_argument("--domain", help="file with the public key domain, one key per line")
    h.add_argument("--output", "-o", help="output file (default: CSV on stdout)")
    h.add_argument(
        "--top",
        type=int,
        help="on stdout, only the K rows of largest count, largest first (the file and the "
        "release keep every row, in key order)",
    )
    h.add_argument("--format", choices=["csv", "json", "parquet"], help="output format")
    h.add_argument(
        "--no-csv-escape",
        action="store_true",
        help="write keys to CSV as they are (by default a key starting with = + - @, tab or CR "
        "gets a leading ' so that spreadsheets do not run it as a formula)",
    )
    h.add_argument("--ledger", help=LEDGER_HELP)
    h.add_argument("--dataset", help="dataset id in the ledger; the release is charged to it")
    h.add_argument("--seed", type=int, help="reproducible, NOT private randomness (tests only)")
    h.add_argument("--no-progress", action="store_true", help="no progress display")
    add_engine_arguments(h, "records are counted")
    add_dry_run_arguments(h)
    add_layout_arguments(h)
    h.set_defaults(run=_cmd_histogram)


def _demo_parser(sub: Any) -> None:
    d = sub.add_parser("demo", help="release a histogram of generated Zipf data and compare")
    d.add_argument(
        "--records", type=int, default=1_000_000, help="number of generated records (1000000)"
    )
    d.add_argument("--distinct", type=int, default=100_000, help="number of possible keys")
    d.add_argument("--exponent", type=float, default=1.1, help="Zipf exponent")
    d.add_argument("--epsilon", type=float, default=1.0, help="epsilon of the release (1)")
    d.add_argument("--delta", type=float, default=1e-8, help="delta of the release (1e-8)")
    d.add_argument(
        "--top", type=int, default=15, help="most frequent keys compared with their release (15)"
    )
    d.add_argument("--data-seed", type=int, default=2026, help="seed of the generated data")
    d.set_defaults(run=_cmd_demo)


def _int_or_auto(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer or 'auto'; got {text!r}") from None


def _plan_parsers(sub: Any) -> None:
    """``privhist plan MECHANISM``: one sub-parser per mechanism with only its own options.

    Registered mechanisms (and ``default``) take the privacy flags, the options of that
    mechanism, ``--max-count``, ``--json`` and ``--plot``; a planner plug-in takes the shared flags
    it declares in ``COMMON`` (default: epsilon, delta, max_count), with ``--epsilon`` optional
    where the planner computes it (``EPSILON_OPTIONAL``), plus its own.
    """
    pl = sub.add_parser("plan", help="parameters and reporting probabilities, before any data")
    planners = _planners()
    psub = pl.add_subparsers(
        dest="mechanism", metavar="MECHANISM", required=True, parser_class=_Parser
    )
    for name in sorted({"default", *catalogue.names()} - set(planners), key=_plan_order):
        cls = catalogue.MECHANISMS.get(name)
        p = psub.add_parser(
            name,
            help="the planner's choice for the request" if cls is None else _help_line(cls.help),
        )
        _privacy_args(p, None if cls is None else [name])
        if cls is None or cls.needs_domain or cls.takes_domain:
            p.add_argument("--domain", help="public domain file (one key per line)")
        p.add_argument("--max-count", type=int, default=20, help="largest true count to report")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument(
            "--plot",
            metavar="FILE",
            help="also draw Pr[released] by true count for every applicable mechanism "
            "(PNG/SVG/PDF)",
        )
        p.set_defaults(run=_cmd_plan)
    for name, planner in sorted(planners.items()):
        p = psub.add_parser(name, help=_help_line((planner.__doc__ or name).strip()))
        common = getattr(planner, "COMMON", ("epsilon", "delta", "max_count"))
        if "epsilon" in common:
            optional = bool(getattr(planner, "EPSILON_OPTIONAL", False))
            p.add_argument(
                "--epsilon",
                type=float,
                required=not optional,
                help="target epsilon (optional: computed)" if optional else "target epsilon",
            )
        if "delta" in common:
            p.add_argument("--delta", type=float, default=0.0, help="target delta (default 0)")
        if "max_count" in common:
            p.add_argument("--max-count", type=int, default=20, help="largest count to report")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        planner.add_arguments(p)
        p.set_defaults(run=planner.run)


def _plugins(package: str) -> list[Any]:
    """The modules of a plug-in package, in name order.

    A module of ``privhist.cli.commands`` defines ``register(subparsers)``, which adds one command;
    a module of ``privhist.cli.planners`` defines ``NAME``, ``add_arguments(plan_parser)`` (flags
    added through :func:`privhist.cli.common.add_once`) and ``run(args) -> int`` for
    ``privhist plan NAME``. New commands therefore never touch this file.
    """
    import importlib
    import pkgutil

    pkg = importlib.import_module(package)
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{package}.{name}") for name in names]


def _planners() -> dict[str, Any]:
    from privhist.cli.planners import _weighted

    found = {m.NAME: m for m in _plugins("privhist.cli.planners")}
    return {**found, **{p.NAME: p for p in _weighted.planners()}}


def _plan_order(name: str) -> tuple[int, str]:
    return (0 if name == "default" else 1, name)


def _privacy_args(p: argparse.ArgumentParser, mechanisms: list[str] | None = None) -> None:
    p.add_argument("--epsilon", type=float, required=True, help="epsilon of the release (> 0)")
    p.add_argument(
        "--delta",
        type=float,
        default=0.0,
        help="delta of the release (default 0, pure DP; mechanisms that need delta > 0 say so)",
    )
    p.add_argument(
        "--max-partitions",
        type=_int_or_auto,
        help="max keys per user (user-level); 'auto': a DP quantile of users' key counts, "
        "bought with 5%% of the budget inside the same spend",
    )
    p.add_argument(
        "--max-per-partition",
        type=_int_or_auto,
        help="max records per user and key; 'auto': a DP quantile of users' most records on "
        "one key (per-key mechanisms), bought with another 5%% of epsilon in the same spend",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of intervals")
    seen: set[str] = set()
    for name in catalogue.MECHANISMS if mechanisms is None else mechanisms:
        for opt in catalogue.MECHANISMS[name].options:
            if opt.name in seen:
                continue
            seen.add(opt.name)
            if opt.kind is bool:
                p.add_argument(
                    opt.flag,
                    dest=opt.name,
                    action="store_true",
                    default=None,
                    help=f"[{name}] {opt.help}",
                )
            else:
                accepts = opt.constraint.expected(note=False) if opt.constraint else ""
                aliases = catalogue.CHOICE_ALIASES.get(opt.name)
                p.add_argument(
                    opt.flag,
                    dest=opt.name,
                    type=opt.kind if aliases is None else _aliased(opt.kind, aliases),
                    default=None,
                    choices=opt.choices,
                    help=f"[{name}] {opt.help}" + (f" ({accepts})" if opt.choices is None else ""),
                )


def _aliased(kind: type, aliases: dict[str, str]) -> Any:
    """An argparse type that reads a former spelling as the current one (before ``choices``)."""

    def convert(value: str) -> Any:
        return kind(aliases.get(value, value))

    return convert


def _options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in catalogue.MECHANISMS.values():
        for opt in entry.options:
            v = getattr(args, opt.name, None)
            if v is not None:
                out[opt.name] = v
    return out


def _neighbouring(args: argparse.Namespace, user_level: bool) -> Neighbouring:
    from privhist.core.neighbouring import Neighbouring

    k, c = args.max_partitions, args.max_per_partition
    for name, value in (("max_partitions", k), ("max_per_partition", c)):
        if value == "auto":
            # 'auto' is drawn from the data at release time; a plan shows one fixed cap
            raise ValidationError(name, "plan", "an integer (the cap the plan is for)", value)
    if user_level or k is not None or c is not None:
        return Neighbouring.user(1 if k is None else k, 1 if c is None else c)
    return Neighbouring.add_remove()


def _read_domain(path: str | None) -> Any:
    if path is None:
        return None
    from privhist.session import read_domain  # reads files with Polars: only when given

    return read_domain(path, "plan")


def _mechanism_for(args: argparse.Namespace, neighbouring: Neighbouring, domain: Any) -> Any:
    from privhist.planning.plan import build, choose_default

    options = _options(args)
    name = args.mechanism
    if name == "default":
        name = choose_default(
            args.epsilon,
            args.delta,
            neighbouring,
            domain=domain,
            keys_only=bool(options.get("keys_only")),
        )
    return build(
        name,
        args.epsilon,
        args.delta,
        neighbouring,
        domain=domain,
        confidence=args.confidence,
        **options,
    )


# -- commands ----------------------------------------------------------------------------------


def _cmd_plan(args: argparse.Namespace) -> int:
    import numpy as np

    import privhist.mechanisms.registry as registry
    from privhist.cli.common import check_plot_path
    from privhist.planning.plan import plan

    check_plot_path(args.plot, f"plan {args.mechanism}")
    domain = _read_domain(getattr(args, "domain", None))
    nb = _neighbouring(args, False)
    if domain is None and registry.get_or_none(args.mechanism) is not None:
        cls = registry.get(args.mechanism)
        if cls.needs_domain:
            domain = np.arange(1, dtype=np.int64)  # parameters do not depend on the domain
    mech = _mechanism_for(args, nb, domain)
    report = plan(mech, args.max_count)
    if args.plot:
        _plot(args, mech, nb, domain)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"mechanism     {report['mechanism']}")
    print(f"guarantee     {report['guarantee']}")
    if "effective_epsilon" in report:
        print(
            f"effective     epsilon {report['effective_epsilon']:.6g} of the requested "
            f"{report['epsilon']:.6g} (the integer construction's largest within the request)"
        )
    for k, v in report["parameters"].items():
        print(f"  {k:<24} {v}")
    if report["noise_std"] is not None:
        print(f"noise std     {report['noise_std']:.4g}")
    rp = report["reporting_probability"]

    half, always = report["count_at_half"], report["count_always_released"]

    def count(found: int | None) -> str:  # None: not within the curve's counts
        return str(found) if found is not None else f"> {len(rp) - 1}"

    beyond = " (beyond the curve: raise --max-count)" if None in (half, always) else ""
    print(f"50% released from true count {count(half)}; always from {count(always)}{beyond}")
    print("\n  count  Pr[released]")
    step = max(1, len(rp) // 25)
    for i in range(0, len(rp), step):
        print(f"  {i:>5}  {rp[i]:.6g}")
    return 0


def _plot(args: argparse.Namespace, mech: Any, nb: Neighbouring, domain: Any) -> None:
    from privhist.planning.plan import rank_candidates
    from privhist.planning.plot import plot_reporting_probability

    keys_only = bool(getattr(mech, "keys_only", False))
    others = [
        c.mechanism
        for c in rank_candidates(args.epsilon, args.delta, nb, domain=domain, keys_only=keys_only)
        if c.name != mech.name
    ]
    path = plot_reporting_probability(
        [mech, *others], args.max_count, args.plot, highlight=mech.name
    )
    print(f"privhist: plot written to {path}", file=sys.stderr)


def _cmd_histogram(args: argparse.Namespace) -> int:
    from privhist.cli.common import layout, print_dry_run, session_for
    from privhist.io.writers import release_to_csv
    from privhist.session import DryRun

    if args.output is None and args.format not in (None, "csv"):
        raise ValidationError("--format", "histogram", "csv when writing to stdout", args.format)
    if args.top is not None and args.top < 1:
        raise ValidationError("--top", "histogram", "an integer >= 1", args.top)
    session = session_for(args, "histogram")
    release = session.histogram(
        args.input,
        key=args.key,
        user=args.user,
        epsilon=args.epsilon,
        delta=args.delta,
        mechanism=args.mechanism,
        max_partitions=args.max_partitions,
        max_per_partition=args.max_per_partition,
        domain=args.domain,
        confidence=args.confidence,
        input_format=args.input_format or ("text" if args.text else None),
        key_type=args.key_type,
        **layout(args, "histogram"),
        options=_options(args),
        output=args.output,
        output_format=args.format,
        escape_formulas=not args.no_csv_escape,
        seed=args.seed,
        dry_run=args.dry_run,
    )
    if isinstance(release, DryRun):
        return print_dry_run(release, args.json)
    if args.output is None:
        text = release_to_csv(release, escape_formulas=not args.no_csv_escape)
        sys.stdout.write(_shown(text, release, args.top))
        sys.stdout.flush()
    _summary(release)
    return 0


def _shown(text: str, release: Any, top: int | None) -> str:
    """The CSV rows as printed: keys that are all integers in numeric order (1, 2, 10 rather than
    1, 10, 2; the order of the released set, so it says nothing more), or with ``--top K`` the K
    rows of largest count first."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= 2:
        return text
    head, rows = lines[0], lines[1:]
    keys = [str(k) for k in release.keys.tolist()]
    order = list(range(len(rows)))
    if all(k.lstrip("-").isdigit() for k in keys):
        order.sort(key=lambda i: int(keys[i]))
    if top is not None and release.values is not None:
        values = release.values.tolist()
        order = sorted(order, key=lambda i: -values[i])[:top]
    return head + "".join(rows[i] for i in order)


def _is_fimi(path: str) -> bool:
    return path.endswith((".dat", ".fimi"))


def _summary(release: Any) -> None:
    """One line on stderr for the data holder: what was released, under which guarantee, and
    (marked as such) exact facts about the input, which are not part of the release."""
    from privhist.cli.common import counted

    info = release.diagnostics
    g = release.metadata["guarantee"]
    compact = release.metadata.get("compact")
    parts = [
        f"released a degree-{compact['degree']} polynomial (query it with privhist compact-query)"
        if isinstance(compact, dict) and "degree" in compact
        else f"released {counted(len(release), 'key')}",
        f"mechanism {release.metadata['mechanism']}",
        f"guarantee {g['statement']}",
    ]
    if "warning" in release.metadata:
        parts.append(release.metadata["warning"])
    effective = release.metadata.get("parameters", {}).get("epsilon_effective")
    if isinstance(effective, float) and effective < g["epsilon"] * (1 - 1e-9):
        parts.append(f"effective epsilon {effective:.6g} of the requested {g['epsilon']:.6g}")
    facts = []
    before, kept = info.get("distinct_keys"), info.get("distinct_keys_counted")
    if before is not None:
        facts.append(counted(before, "distinct key"))
        if kept is not None and kept != before:
            facts.append(f"{kept} of them kept after bounding")
    elif kept is not None:
        facts.append(counted(kept, "distinct key"))
    if "users" in info:
        facts.append(counted(info["users"], "user"))
    dropped = (
        ("null_keys", "record with a null key was", "records with a null key were"),
        ("null_users", "record with a null user was", "records with a null user were"),
        ("keys_outside_domain", "key outside the domain was", "keys outside the domain were"),
    )
    for fact, one, many in dropped:
        if info.get(fact):
            facts.append(counted(info[fact], f"{one} dropped", f"{many} dropped"))
    parts.append("input (exact, not private, not in the output): " + ", ".join(facts))
    print("privhist: " + "; ".join(parts), file=sys.stderr)


def _cmd_demo(args: argparse.Namespace) -> int:
    from privhist.cli.demo import MAX_DEMO_RECORDS, run_demo
    from privhist.core.validation import check_positive_int

    records = check_positive_int(args.records, "demo", "--records")
    if records > MAX_DEMO_RECORDS:
        raise ValidationError(
            "--records", "demo", f"<= {MAX_DEMO_RECORDS} (the largest accepted)", records
        )
    distinct = check_positive_int(args.distinct, "demo", "--distinct")
    if distinct > MAX_DEMO_RECORDS:  # one weight per possible key is held in memory
        raise ValidationError(
            "--distinct", "demo", f"<= {MAX_DEMO_RECORDS} (the largest accepted)", distinct
        )
    if not math.isfinite(args.exponent) or args.exponent < 0:
        raise ValidationError("--exponent", "demo", "a finite number >= 0", args.exponent)
    check_positive_int(args.top, "demo", "--top", minimum=0)

    run_demo(
        records=args.records,
        distinct=args.distinct,
        exponent=args.exponent,
        epsilon=args.epsilon,
        delta=args.delta,
        top=args.top,
        data_seed=args.data_seed,
    )
    return 0
