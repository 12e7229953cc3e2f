"""Writes requests.py, the request types the handlers are typed with, from the handler modules'
declarations (broker/handlers/declare.py): for each API `<Name>Request`, the union of the
request classes of the versions it declares, and the version families and nested structs it
declares. tests/handlers/test_request_types.py checks that requests.py is what this writes.

    python -m samsa.broker.handlers.request_types          # rewrite requests.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from samsa.protocol.codec import request_type

from .declare import ApiDeclaration

TARGET = Path(__file__).with_name("requests.py")
WIDTH = 100

HEADER = '''\
"""The request types each handler serves: per API, the union of the request classes (kio's,
protocol/controlled_shutdown.py's) of the versions its handler module declares (`@api`), and the
version families and nested structs it declares.

Written by `python -m samsa.broker.handlers.request_types` from those declarations: do not edit.
Only for the type checker: handlers import these names under `TYPE_CHECKING`, so serving a
request never loads the schema modules of versions nobody asked for.
"""

from __future__ import annotations

from typing import TypeAlias

'''


def _module_alias(module: str) -> str:
    """kio.schema.fetch.v4.request -> fetch_v4; any other module: its last name."""
    parts = module.split(".")
    if parts[:2] == ["kio", "schema"] and len(parts) == 5:
        return f"{parts[2]}_{parts[3]}"
    return parts[-1]


def _classes(key: int, first: int, last: int, nested: str | None = None) -> list[tuple[str, str]]:
    """(module, name) of the request class (or its nested `nested` class) of each version."""
    out = []
    for version in range(first, last + 1):
        cls = request_type(key, version)
        out.append((cls.__module__, nested or cls.__name__))
    return out


def _alias(name: str, members: list[tuple[str, str]]) -> str:
    names = [f"{_module_alias(m)}.{c}" for m, c in members]
    one_line = f"{name}: TypeAlias = {' | '.join(names)}"
    if len(one_line) <= WIDTH:
        return one_line
    lines, line = [], "   "
    for i, n in enumerate(names):
        piece = f" {n}" if i == 0 else f" | {n}"
        if i and len(line) + len(piece) > WIDTH:
            lines.append(line)
            line = f"    | {n}"
        else:
            line += piece
    lines.append(line)
    return f"{name}: TypeAlias = (\n" + "\n".join(lines) + "\n)"


def render(declared: list[ApiDeclaration]) -> str:
    aliases: dict[str, list[tuple[str, str]]] = {}
    for d in declared:
        first, last = d.versions
        aliases[f"{d.name}Request"] = _classes(d.key, first, last)
        for family, (lo, hi) in d.families.items():
            aliases[family] = _classes(d.key, lo, hi)
        for struct, cls in d.structs.items():
            aliases[struct] = _classes(d.key, first, last, cls)
    modules = sorted({m for members in aliases.values() for m, _ in members})
    kio = [m for m in modules if m.startswith("kio.")]
    own = [m for m in modules if not m.startswith("kio.")]
    imports = [f"import {m} as {_module_alias(m)}" for m in sorted(kio, key=_import_order)]
    if own:
        imports.append("")
        imports += [f"import {m} as {_module_alias(m)}" for m in own]
    body = "\n".join(_alias(name, aliases[name]) for name in sorted(aliases))
    return HEADER + "\n".join(imports) + "\n\n" + body + "\n"


def _import_order(module: str) -> tuple[str, int]:
    """kio.schema.fetch.v10.request after v9 (as the import sorter orders them)."""
    parts = module.split(".")
    return ".".join(parts[:3]), int(parts[3][1:]) if parts[3][1:].isdigit() else -1


def main() -> int:
    from samsa.broker.apis import declarations

    TARGET.write_text(render([d for d, _ in declarations()]))
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
