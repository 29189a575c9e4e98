"""The mutation operators: small, declared rewrites of one AST node of a privacy-critical function.

Every operator names a way a one-line slip breaks privacy or exactness, and every mutant is one
rewrite of one node, applied to the source text (the node's span is replaced by the unparsed
rewrite, so the rest of the file keeps its lines):

``scale``
    A noise parameter scaled by 0.9 or 1.1: the parameter argument of a sampler call
    (``discrete_laplace(scale, ...)``, ``discrete_gaussian(sigma2, ...)``, ``binomial(n, p)``'s
    ``p``, ``sigma2_for(rho, ...)``, ...) and the right-hand side of an assignment to a
    noise-parameter name (``sigma2``, ``scale``, ``rho``, ``rate``, ...).
``off_by_one``
    One side of an ordering comparison moved by one (``x >= T`` to ``x >= T + 1`` / ``T - 1``):
    thresholds, caps and ranks.
``compare``
    A comparison flipped: ``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``.
``rounding``
    A rounding direction flipped: ``floor``/``ceil``, ``rational_at_least``/``rational_at_most``,
    ``float_up``/``float_down``, ``round_floor``/``round_ceiling``, ``a // b`` to a ceiling
    division and ``ceil_div`` to a floor division, the lower/upper end of an enclosure
    (``exp_rational_bounds(...)[0]`` and ``[1]``), ``isqrt(x)`` to ``isqrt(x) + 1``.
``drop_term``
    A term or factor dropped: ``a + b``, ``a - b`` and ``a * b`` become ``a``; an augmented
    assignment (``x += y``) is removed.
``boolean``
    ``and``/``or`` swapped, a ``not`` removed.
``drop_raise``
    A ``raise`` replaced by ``pass`` (a check that no longer fails closed).
``return_true``
    The body of a function annotated ``-> bool`` answers ``True`` (a check that always passes).

Mutants are generated inside the functions an area names (``areas.py``), never in docstrings,
type annotations or decorators. A mutant's id is a hash of what it changes (module, function,
operator, the original and the rewritten text, and its occurrence among identical rewrites), so
it stays the same when unrelated lines move.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

#: samplers and calibration calls whose noise parameter is scaled, with the argument's position
SCALE_CALLS: dict[str, int] = {
    "discrete_laplace": 0,
    "discrete_gaussian": 0,
    "geometric": 0,
    "sample_laplace": 0,
    "sample_geometric": 0,
    "bernoulli_exp": 0,
    "binomial": 1,
    "sample_units": 1,
    "sigma2_for": 0,
    "rational_at_least": 0,
    "rational_at_most": 0,
    "LaplaceCountNoise": 1,
    "calibrate_threshold": 2,
    "calibrate_rho": 1,
    "stability_threshold": 2,
}
#: assignment targets holding a noise parameter (``self.`` stripped)
SCALE_NAMES = re.compile(
    r"^(sigma2s?|s2|scale|noise_scale|rate|sampling_rate|rho|rho_sel|rho_q|variance|var|"
    r"count_sigma2|theta|tq|mu2|eps_q|epsilon_key|delta_key|target|p_f)$"
)
#: pairs of names whose swap flips a rounding direction
ROUND_SWAPS: dict[str, str] = {
    "floor": "ceil",
    "ceil": "floor",
    "rational_at_least": "rational_at_most",
    "rational_at_most": "rational_at_least",
    "float_up": "float_down",
    "float_down": "float_up",
    "round_floor": "round_ceiling",
    "round_ceiling": "round_floor",
}
#: calls returning an enclosure ``(lo, hi)`` whose ends are swapped when indexed
ENCLOSURES = {"exp_rational_bounds", "exp_bounds", "threshold_bounds", "ratio_bounds"}

OPERATORS = (
    "scale",
    "off_by_one",
    "compare",
    "rounding",
    "drop_term",
    "boolean",
    "drop_raise",
    "return_true",
)

_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


@dataclass(frozen=True)
class Mutant:
    """One rewrite of one node of ``module`` (a path relative to ``src/``)."""

    id: str
    module: str
    function: str
    operator: str
    line: int
    original: str
    mutated: str
    source: str  # the whole mutated module

    @property
    def description(self) -> str:
        return f"{self.module}:{self.line} {self.function}: {self.original!r} -> {self.mutated!r}"


def _name_of(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _target_name(target: ast.expr) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


class _Collector:
    """Walks one function and yields ``(operator, node, replacement_text)``."""

    def __init__(self, source: str, operators: tuple[str, ...]) -> None:
        self.source = source
        self.ops = set(operators)

    def text(self, node: ast.AST) -> str:
        seg = ast.get_source_segment(self.source, node)
        return seg if seg is not None else ast.unparse(node)

    def walk(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> Iterator[tuple[str, ast.AST, str]]:
        skip: set[int] = set()
        # annotations, decorators and the docstring are not code
        for arg in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]:
            if arg.annotation is not None:
                skip.update(id(n) for n in ast.walk(arg.annotation))
        for d in fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None]:
            skip.update(id(n) for n in ast.walk(d))
        if fn.returns is not None:
            skip.update(id(n) for n in ast.walk(fn.returns))
        for dec in fn.decorator_list:
            skip.update(id(n) for n in ast.walk(dec))
        body = fn.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skip.add(id(body[0].value))
        # nested functions are walked as part of their parent (closures are part of the logic)
        if "return_true" in self.ops and isinstance(fn.returns, ast.Name):
            if fn.returns.id == "bool":
                yield from self._return_true(fn)
        for node in ast.walk(fn):
            if id(node) in skip or node is fn:
                continue
            if isinstance(node, ast.AnnAssign):
                skip.update(id(n) for n in ast.walk(node.annotation))
            yield from self._node(node)

    def _return_true(
        self, fn: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> Iterator[tuple[str, ast.AST, str]]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                if not (isinstance(node.value, ast.Constant) and node.value.value is True):
                    yield "return_true", node, "return True"

    def _node(self, node: ast.AST) -> Iterator[tuple[str, ast.AST, str]]:
        ops = self.ops
        if isinstance(node, ast.Call):
            name = _name_of(node.func)
            if "scale" in ops and name in SCALE_CALLS:
                i = SCALE_CALLS[name]
                if i < len(node.args) and not isinstance(node.args[i], ast.Starred):
                    for factor in ("9, 10", "11, 10"):
                        new = ast.Call(node.func, list(node.args), list(node.keywords))
                        new.args[i] = _scaled(node.args[i], factor)
                        yield "scale", node, ast.unparse(new)
            if "rounding" in ops and name in ROUND_SWAPS:
                swapped = ROUND_SWAPS[name]
                if isinstance(node.func, ast.Name):
                    func: ast.expr = ast.Name(swapped, ast.Load())
                else:
                    assert isinstance(node.func, ast.Attribute)
                    func = ast.Attribute(node.func.value, swapped, ast.Load())
                yield "rounding", node, ast.unparse(ast.Call(func, node.args, node.keywords))
            if "rounding" in ops and name == "ceil_div" and len(node.args) == 2:
                a, b = node.args
                yield "rounding", node, f"(({ast.unparse(a)}) // ({ast.unparse(b)}))"
            if "rounding" in ops and name == "isqrt" and len(node.args) == 1:
                yield "rounding", node, f"({ast.unparse(node)} + 1)"
        elif isinstance(node, ast.Subscript) and "rounding" in ops:
            inner = node.value
            if (
                isinstance(inner, ast.Call)
                and _name_of(inner.func) in ENCLOSURES
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in (0, 1)
            ):
                other = 1 - int(node.slice.value)
                yield "rounding", node, f"{ast.unparse(inner)}[{other}]"
        elif isinstance(node, ast.BinOp):
            if "rounding" in ops and isinstance(node.op, ast.FloorDiv):
                a, b = ast.unparse(node.left), ast.unparse(node.right)
                yield "rounding", node, f"(-((-({a})) // ({b})))"
            if "drop_term" in ops and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
                yield "drop_term", node, f"({ast.unparse(node.left)})"
        elif isinstance(node, ast.AugAssign) and "drop_term" in ops:
            if isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.BitOr | ast.BitAnd):
                yield "drop_term", node, "pass"
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if "compare" in ops and type(op) in _FLIP:
                    new_ops = list(node.ops)
                    new_ops[i] = _FLIP[type(op)]()
                    yield (
                        "compare",
                        node,
                        f"({ast.unparse(ast.Compare(node.left, new_ops, node.comparators))})",
                    )
                if "off_by_one" in ops and isinstance(op, _ORDERING):
                    right = node.comparators[i]
                    if isinstance(right, ast.Constant) and not isinstance(right.value, int | float):
                        continue
                    for sign in ("+", "-"):
                        comps = list(node.comparators)
                        comps[i] = ast.parse(f"({ast.unparse(right)}) {sign} 1", mode="eval").body
                        yield (
                            "off_by_one",
                            node,
                            f"({ast.unparse(ast.Compare(node.left, node.ops, comps))})",
                        )
        elif isinstance(node, ast.BoolOp) and "boolean" in ops:
            swapped_op: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield "boolean", node, f"({ast.unparse(ast.BoolOp(swapped_op, node.values))})"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and "boolean" in ops:
            yield "boolean", node, f"({ast.unparse(node.operand)})"
        elif isinstance(node, ast.Raise) and "drop_raise" in ops:
            yield "drop_raise", node, "pass"
        elif isinstance(node, ast.Assign | ast.AnnAssign) and "scale" in ops:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if value is None or len(targets) != 1:
                return
            name = _target_name(targets[0])
            if name is None or not SCALE_NAMES.match(name):
                return
            if isinstance(value, ast.Constant | ast.Tuple | ast.List | ast.ListComp):
                return
            for factor in ("9, 10", "11, 10"):
                yield "scale", value, ast.unparse(_scaled(value, factor))


def _scaled(expr: ast.expr, factor: str) -> ast.expr:
    return ast.parse(f"({ast.unparse(expr)}) * _MUT_FRACTION({factor})", mode="eval").body


def _line_offsets(source: str) -> list[int]:
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    return offsets


def _replace(source: str, offsets: list[int], node: ast.AST, text: str) -> str:
    start = offsets[node.lineno - 1] + _char_col(source, offsets, node.lineno, node.col_offset)
    end_line = node.end_lineno if node.end_lineno is not None else node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    end = offsets[end_line - 1] + _char_col(source, offsets, end_line, end_col)
    return source[:start] + text + source[end:]


def _char_col(source: str, offsets: list[int], line: int, byte_col: int) -> int:
    """AST columns count UTF-8 bytes; turn one into a character offset on its line."""
    text = source[offsets[line - 1] : offsets[line]]
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and methods (with their qualified names); nested ones stay inside."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


def mutants(
    module: str, source: str, functions: tuple[str, ...], operators: tuple[str, ...] = OPERATORS
) -> list[Mutant]:
    """Every mutant of ``source`` (the text of ``module``) in ``functions`` (qualified names;
    ``"*"`` for every function and method of the module)."""
    tree = ast.parse(source)
    offsets = _line_offsets(source)
    collector = _Collector(source, operators)
    wanted = set(functions)
    found: set[str] = set()
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for qualname, fn in _functions(tree):
        if "*" not in wanted and qualname not in wanted:
            continue
        found.add(qualname)
        for operator, node, text in collector.walk(fn):
            original = collector.text(node)
            if _normal(original) == _normal(text):
                continue
            new_source = _replace(source, offsets, node, text)
            if "_MUT_FRACTION" in text:
                new_source += "\nfrom fractions import Fraction as _MUT_FRACTION  # mutation\n"
            try:
                ast.parse(new_source)
            except SyntaxError:
                continue
            key = f"{module}|{qualname}|{operator}|{_normal(original)}|{_normal(text)}"
            seen[key] = seen.get(key, 0) + 1
            digest = hashlib.sha1(f"{key}|{seen[key]}".encode()).hexdigest()[:10]
            out.append(
                Mutant(
                    id=digest,
                    module=module,
                    function=qualname,
                    operator=operator,
                    line=getattr(node, "lineno", fn.lineno),
                    original=_short(original),
                    mutated=_short(text),
                    source=new_source,
                )
            )
    missing = wanted - found - {"*"}
    if missing:
        raise KeyError(f"{module}: no function named {sorted(missing)}")
    return out


def _normal(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, limit: int = 90) -> str:
    t = _normal(text)
    return t if len(t) <= limit else t[: limit - 3] + "..."
