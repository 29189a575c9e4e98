"""Every input path fails closed with one line: a property-based test over every command's options
and over generated hostile files.

Each example takes one command with valid arguments (a release charged to a ledger where the
command charges one) and spoils exactly one thing: an option gets a value outside what it accepts,
or a file argument (the input, a domain, a sample or release read back, the ledger) is replaced by
a hostile file (empty, binary, non-UTF-8, truncated, NaN/inf cells, a huge line, a deep or
over-long path). Every spoiled thing is one the command must refuse, so each example asserts: exit
status 2, exactly one line on stderr, no traceback, nothing on stdout, no new file or directory,
and the ledger file unchanged, byte for byte.

The budget is a fixed number of derandomized examples (:data:`EXAMPLES`), so the test takes the
same time and finds the same cases on every run.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privhist.accounting.ledger import Ledger
from privhist.cli.main import main
from privhist.core.budget import Budget

EXAMPLES = int(os.environ.get("PRIVHIST_FUZZ_EXAMPLES", "150"))

# values every flag of the kind refuses
BAD_EPSILON = ["nan", "inf", "-inf", "-1", "0", "1e-400", "1e6", "1e308", "abc", ""]
BAD_DELTA = ["nan", "inf", "-1", "1", "2", "x"]
BAD_COUNT = ["0", "-1", "1" + "0" * 30, "1.5", "x"]  # positive integers
BAD_FRACTION = ["0", "1", "-0.5", "2", "nan", "inf"]  # in (0, 1)


@dataclass(frozen=True)
class World:
    """A directory of valid inputs, and a copy of it that each example spoils."""

    root: Path

    def path(self, name: str) -> str:
        return str(self.root / name)


def _build_world(root: Path) -> None:
    rows = ["user,key,value,weight"] + [
        f"u{i},{'abcab'[i % 5]},{(i * 37) % 100},{1 + i % 4}" for i in range(400)
    ]
    (root / "data.csv").write_text("\n".join(rows) + "\n")
    (root / "domain.txt").write_text("a\nb\nc\n")
    Ledger(root / "ledger.sqlite").init_dataset("d", Budget(100.0, 1e-3))
    Ledger(root / "user.sqlite").init_dataset("u", Budget(100.0, 1e-3), unit="user")
    seeded = ["--seed", "3", "--no-progress"]
    assert main(["sample", str(root / "data.csv"), "--key", "key", "--tau", "0.5",
                 "--epsilon", "1", "--delta", "1e-6", "-o", str(root / "sample.csv"),
                 *seeded]) == 0  # fmt: skip
    assert main(["sample", str(root / "data.csv"), "--key", "key", "--tau", "0.5",
                 "--epsilon", "1", "--delta", "1e-6", "-o", str(root / "sample.json"),
                 *seeded]) == 0  # fmt: skip
    assert main(["histogram", str(root / "data.csv"), "--key", "value", "--key-type", "int",
                 "--mechanism", "compact", "--universe-bits", "8", "--max-keys", "128",
                 "--count-bound", "100", "--epsilon", "1", "-o", str(root / "compact.json"),
                 *seeded]) == 0  # fmt: skip


# -- commands: valid argv, and the flags and files each must refuse when spoiled -------------------


@dataclass(frozen=True)
class Command:
    name: str
    argv: Callable[[World], list[str]]
    #: flag -> values it must refuse (the flag is replaced or appended)
    bad_options: dict[str, list[str]]
    #: positional or flag -> the hostile file kinds it must refuse there
    files: dict[str, tuple[str, ...]]


DATA_KINDS = ("missing", "empty", "binary", "non_utf8", "deep", "long_name", "directory")
READBACK_KINDS = (*DATA_KINDS, "truncated", "nan_cells", "huge_line")


def _charge(w: World) -> list[str]:
    return ["--ledger", w.path("ledger.sqlite"), "--dataset", "d", "--no-progress"]


COMMANDS = [
    Command(
        "histogram",
        lambda w: [
            "histogram",
            w.path("data.csv"),
            "--key",
            "key",
            "--epsilon",
            "0.5",
            "--delta",
            "1e-6",
            "-o",
            w.path("out.csv"),
            *_charge(w),
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--confidence": BAD_FRACTION,
            "--key": ["nosuchcolumn"],
            "--format": ["json", "parquet", "xml"],
            "--dataset": ["unknown", ""],
            "--mechanism": ["nosuch"],
        },
        {"input": DATA_KINDS, "--domain": DATA_KINDS, "--ledger": ("corrupt", "missing")},
    ),
    Command(
        "heavy-hitters",
        lambda w: [
            "heavy-hitters",
            w.path("data.csv"),
            "--key",
            "key",
            "--one-shot",
            "--epsilon",
            "0.5",
            "--delta",
            "1e-6",
            "-o",
            w.path("out.csv"),
            *_charge(w),
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--top": ["-1", "x"],
            "--key": ["nosuchcolumn"],
            "--levels": BAD_COUNT,
        },
        {"input": DATA_KINDS, "--ledger": ("corrupt", "missing")},
    ),
    Command(
        "quantiles",
        lambda w: [
            "quantiles",
            w.path("data.csv"),
            "--column",
            "value",
            "--range",
            "0",
            "100",
            "--q",
            "0.5",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            *_charge(w),
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--levels": BAD_COUNT,
            "--branching": ["0", "1", "-2", "x"],
            "--q": ["-0.1", "1.5", "nan"],
            "--column": ["nosuchcolumn", "key"],
        },
        {"input": DATA_KINDS, "--ledger": ("corrupt", "missing")},
    ),
    Command(
        "range",
        lambda w: [
            "range",
            w.path("data.csv"),
            "--column",
            "value",
            "--range",
            "0",
            "100",
            "--query",
            "10",
            "50",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            *_charge(w),
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--levels": BAD_COUNT,
            "--confidence": BAD_FRACTION,
        },
        {"input": DATA_KINDS, "--ledger": ("corrupt", "missing")},
    ),
    Command(
        "sample",
        lambda w: [
            "sample",
            w.path("data.csv"),
            "--key",
            "key",
            "--weight",
            "weight",
            "--aggregate",
            "--tau",
            "0.5",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "-o",
            w.path("out.json"),
            *_charge(w),
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--tau": ["0", "-1", "nan", "inf", "x"],
            "--max-frequency": BAD_COUNT,
            "--power": ["nan", "inf", "-1"],
            "--weight": ["nosuchcolumn", "key"],
        },
        {"input": (*DATA_KINDS, "nan_cells"), "--ledger": ("corrupt", "missing")},
    ),
    Command(
        "federated-frequency",
        lambda w: [
            "federated-frequency",
            w.path("data.csv"),
            "--user",
            "user",
            "--key",
            "key",
            "--domain",
            w.path("domain.txt"),
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--max-items",
            "2",
            "--seed",
            "1",
            "--no-progress",
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--theta": ["0", "0.3", "-1", "nan"],
            "--bits": ["0", "-1", "100", "x"],
            "--max-items": BAD_COUNT,
        },
        {"input": DATA_KINDS, "--domain": DATA_KINDS},
    ),
    Command(
        "estimate",
        lambda w: ["estimate", w.path("sample.csv"), "--where", "all"],
        {"--where": ["nosuch", "regex=(", "key"]},
        {"input": READBACK_KINDS},
    ),
    Command(
        "estimate-json",
        lambda w: ["estimate", w.path("sample.json"), "--where", "prefix=a"],
        {"--where": ["nosuch", "regex=("]},
        {"input": READBACK_KINDS},
    ),
    Command(
        "compact-query",
        lambda w: ["compact-query", w.path("compact.json"), "3", "7"],
        {"key": ["\udcff\udcfe", "256", "-1", "abc", "1" + "0" * 40]},
        {"input": READBACK_KINDS},
    ),
    Command(
        "plan",
        lambda w: ["plan", "default", "--epsilon", "1", "--delta", "1e-6", "--json"],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--max-count": ["-1", "1" + "0" * 30, "x"],
            "--confidence": BAD_FRACTION,
        },
        {"--domain": DATA_KINDS},
    ),
    Command(
        "demo",
        lambda w: ["demo", "--records", "1000", "--distinct", "50", "--top", "3"],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--records": BAD_COUNT,
            "--distinct": BAD_COUNT,
            "--exponent": ["nan", "inf", "-1", "x"],
            "--top": ["-1", "x"],
        },
        {},
    ),
    Command(
        "simulate",
        lambda w: [
            "simulate",
            "sample-and-threshold",
            w.path("data.csv"),
            "--key",
            "key",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--seed",
            "1",
            "--no-progress",
        ],
        {
            "--epsilon": BAD_EPSILON,
            "--delta": BAD_DELTA,
            "--sampling-rate": ["0", "2", "-0.5", "nan"],
            "--threshold": ["0", "-1", "x"],
            "--top": ["-1", "x"],
            "--key": ["nosuchcolumn"],
        },
        {"input": DATA_KINDS},
    ),
    Command(
        "budget-init",
        lambda w: [
            "budget",
            "init",
            "--dataset",
            "new",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--ledger",
            w.path("new.sqlite"),
        ],
        {
            "--epsilon": [
                e for e in BAD_EPSILON if e not in ("1e6", "1e308")
            ],  # totals may be large
            "--delta": BAD_DELTA,
            "--dataset": [""],
            "--ledger": ["nodir/l.sqlite", "a/b/c/l.sqlite"],
        },
        {},
    ),
    Command(
        "budget-show",
        lambda w: ["budget", "show", "--ledger", w.path("ledger.sqlite")],
        {"--dataset": ["unknown", ""]},
        {"--ledger": ("corrupt", "missing", "empty", "binary", "directory")},
    ),
]


# -- hostile files ---------------------------------------------------------------------------------


def _hostile(kind: str, valid: Path, data: st.DataObject) -> str:
    """Write a hostile file of ``kind`` next to ``valid`` (spoiling a copy of it); its path."""
    root = valid.parent
    original = valid.read_bytes() if valid.is_file() else b""
    target = root / f"hostile{valid.suffix}"
    if kind == "missing":
        return str(root / f"missing{valid.suffix}")
    if kind == "deep":
        depth = data.draw(st.integers(2, 60), label="depth")
        return str(root.joinpath(*(["d" * 20] * depth)) / f"x{valid.suffix}")
    if kind == "long_name":
        return str(root / ("n" * data.draw(st.integers(256, 1000), label="length")))
    if kind == "directory":
        target = root / f"adir{valid.suffix}"
        target.mkdir(exist_ok=True)
        return str(target)
    if kind == "empty":
        content = b""
    elif kind == "binary":
        noise = data.draw(st.binary(min_size=0, max_size=300), label="bytes")
        at = data.draw(st.integers(0, len(noise)), label="at")
        content = noise[:at] + b"\xff\x00\xfe" + noise[at:]
    elif kind == "non_utf8":
        lines = original.split(b"\n")
        i = data.draw(st.integers(1, max(1, len(lines) - 2)), label="line")
        lines[i] = lines[i][:1] + b"\xc3\x28\xff" + lines[i][1:]
        content = b"\n".join(lines)
    elif kind == "truncated":
        cut = data.draw(st.integers(1, max(1, len(original) - 2)), label="cut")
        content = original[:cut]
    elif kind == "nan_cells":
        content = _nan_cells(original, valid.suffix, data)
    elif kind == "huge_line":
        lines = original.split(b"\n")
        i = data.draw(st.integers(1, max(1, len(lines) - 2)), label="line")
        size = data.draw(st.sampled_from([100_000, 1_000_000]), label="size")
        lines.insert(i, b"x" * size)
        content = b"\n".join(lines)
    elif kind == "corrupt":  # a ledger with bytes flipped in its header or its schema text
        content = bytearray(original)
        start = original.find(b"CREATE TABLE")
        region = data.draw(st.sampled_from(["header", "schema"]), label="region")
        # the magic string, or the keywords of the first CREATE TABLE (a flip elsewhere in the
        # schema, e.g. in a column's default text, can leave a file SQLite still reads)
        lo, hi = (0, 16) if region == "header" else (start, start + len(b"CREATE TABLE"))
        offsets = st.lists(st.integers(lo, hi - 1), min_size=1, max_size=8, unique=True)
        for offset in data.draw(offsets, label="offsets"):
            content[offset] ^= 0x80
        content = bytes(content)
    else:  # pragma: no cover
        raise AssertionError(kind)
    target.write_bytes(content)
    return str(target)


def _nan_cells(original: bytes, suffix: str, data: st.DataObject) -> bytes:
    bad = data.draw(st.sampled_from(["nan", "-inf", "inf", "NaN"]), label="value")
    if suffix == ".json" and not json.loads(original).get("rows"):  # compact: spoil a number
        numbers = [m.start() for m in re.finditer(rb": -?[0-9]", original)]
        at = data.draw(st.sampled_from(numbers), label="number") + 2
        end = re.compile(rb"-?[0-9]+").match(original, at)
        assert end is not None
        return original[:at] + bad.encode() + original[end.end() :]
    if suffix == ".json":
        doc = json.loads(original)
        row = data.draw(st.integers(0, len(doc["rows"]) - 1), label="row")
        doc["rows"][row]["estimate"] = bad
        return json.dumps(doc).replace(f'"{bad}"', bad).encode()
    lines = original.decode().split("\n")
    header = lines[0].split(",")
    col = data.draw(
        st.sampled_from([c for c in ("estimate", "variance", "weight") if c in header]),
        label="column",
    )
    rows = [i for i, line in enumerate(lines) if i > 0 and line and not line.startswith("#")]
    i = data.draw(st.sampled_from(rows), label="line")
    cells = lines[i].split(",")
    cells[header.index(col)] = bad
    lines[i] = ",".join(cells)
    return "\n".join(lines).encode()


# -- the property ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-world")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        _build_world(root)
    return root


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def _spoil(command: Command, w: World, data: st.DataObject) -> list[str]:
    argv = command.argv(w)
    choices = [("option", k) for k in command.bad_options] + [("file", k) for k in command.files]
    what, slot = data.draw(st.sampled_from(choices), label="spoil")
    if what == "option":
        value = data.draw(st.sampled_from(command.bad_options[slot]), label=slot)
        if slot == "key":  # compact-query's positional keys
            return [*argv, value]
        if slot in argv:
            argv[argv.index(slot) + 1] = value
            return argv
        return [*argv, slot, value]
    kind = data.draw(st.sampled_from(command.files[slot]), label=slot)
    first = 2 if command.name == "simulate" else 1  # after the protocol name
    index = first if slot == "input" else argv.index(slot) + 1 if slot in argv else None
    if command.name.startswith("budget"):
        index = argv.index(slot) + 1
    valid = Path(argv[index]) if index is not None else w.root / "domain.txt"
    hostile = _hostile(kind, valid, data)
    if index is None:
        return [*argv, slot, hostile]
    argv[index] = hostile
    return argv


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(command=st.sampled_from(COMMANDS), data=st.data())
def test_every_input_path_fails_closed_with_one_line(
    world: Path, command: Command, data: st.DataObject
) -> None:
    case = world.parent / "case"
    shutil.rmtree(case, ignore_errors=True)
    shutil.copytree(world, case)
    argv = _spoil(command, World(case), data)
    before = _snapshot(case)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code if isinstance(exc.code, int) else 2
    lines = err.getvalue().splitlines()
    note = f"{argv!r}\nstderr: {err.getvalue()[-2000:]!r}"
    assert code == 2, note
    assert len(lines) == 1 and lines[0].startswith("privhist: error: "), note
    assert "Traceback" not in err.getvalue(), note
    assert out.getvalue() == "", note
    assert _snapshot(case) == before, note  # no output file, no directory, ledgers unchanged
