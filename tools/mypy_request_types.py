"""mypy plugin: reads broker/handlers/requests.py's table of request types.

requests.py (written by `python -m samsa.broker.handlers.request_types`) names each type as
`Versions[key, first, last]` or `Versions[key, first, last, Literal["Nested"]]`: the union of the
request classes (or of the nested class of that name) of versions first..last of API `key`, as
samsa.protocol.codec.request_type finds them at run time. This plugin expands that to the
union for mypy, and adds the classes' modules to requests.py's imports, so the table stays one
line an API instead of an import and a union written out per version.

pyproject.toml: [tool.mypy] plugins = ["tools/mypy_request_types.py"]
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import AssignmentStmt, IndexExpr, IntExpr, MypyFile, NameExpr, StrExpr, TupleExpr
from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.types import RawExpressionType, Type, UnboundType, UnionType

from samsa.protocol.codec import request_type

REQUESTS = "samsa.broker.handlers.requests"
VERSIONS = "samsa.broker.handlers.request_types.Versions"
PRIORITY = 10  # mypy.build.PRI_MED: an ordinary import


def _classes(key: int, first: int, last: int, nested: str | None) -> list[str]:
    """The full names of the classes `Versions[key, first, last, nested]` stands for."""
    out = []
    for version in range(first, last + 1):
        cls = request_type(key, version)
        out.append(f"{cls.__module__}.{nested or cls.__name__}")
    return out


def _table_row(stmt: object) -> tuple[int, int, int, str | None] | None:
    """(key, first, last, nested) of a `Name: TypeAlias = Versions[...]` line of requests.py."""
    if not (isinstance(stmt, AssignmentStmt) and isinstance(stmt.rvalue, IndexExpr)):
        return None
    base, index = stmt.rvalue.base, stmt.rvalue.index
    if not (isinstance(base, NameExpr) and base.name == "Versions"
            and isinstance(index, TupleExpr)):
        return None
    ints = [i.value for i in index.items if isinstance(i, IntExpr)]
    names = [i.index.value for i in index.items
             if isinstance(i, IndexExpr) and isinstance(i.index, StrExpr)]  # Literal["Nested"]
    return ints[0], ints[1], ints[2], names[0] if names else None


def _argument(arg: Type) -> int | str:
    if isinstance(arg, RawExpressionType) and isinstance(arg.literal_value, int | str):
        return arg.literal_value
    if isinstance(arg, UnboundType) and arg.original_str_expr is not None:  # "Nested"
        return arg.original_str_expr
    if isinstance(arg, UnboundType) and len(arg.args) == 1:  # Literal["Nested"]
        return _argument(arg.args[0])
    raise TypeError(f"Versions takes three ints and a Literal class name, not {arg}")


def _expand(ctx: AnalyzeTypeContext) -> Type:
    args = [_argument(a) for a in ctx.type.args]
    key, first, last = (int(a) for a in args[:3])
    nested = str(args[3]) if len(args) > 3 else None
    members = [ctx.api.named_type(name, []) for name in _classes(key, first, last, nested)]
    return UnionType.make_union(members, ctx.type.line, ctx.type.column)


class RequestTypes(Plugin):
    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        if file.fullname != REQUESTS:
            return []
        modules: set[str] = set()
        for row in filter(None, map(_table_row, file.defs)):
            key, first, last, nested = row
            modules.update(n.rsplit(".", 1)[0] for n in _classes(key, first, last, nested))
        return [(PRIORITY, m, -1) for m in sorted(modules)]

    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        return _expand if fullname == VERSIONS else None


def plugin(version: str) -> type[Plugin]:
    return RequestTypes
