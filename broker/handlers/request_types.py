"""Writes requests.py, the request types the handlers are typed with, from the handler modules'
declarations (broker/handlers/declare.py): a table with, for each API, `<Name>Request` (the
union of the request classes of the versions it declares) and the version families and nested
structs it declares, one line each, that the mypy plugin tools/mypy_request_types.py expands.
tests/handlers/test_declarations.py checks that requests.py is what this writes.

    python -m samsa.broker.handlers.request_types          # rewrite requests.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from .declare import ApiDeclaration

TARGET = Path(__file__).with_name("requests.py")
WIDTH = 100

HEADER = '''\
"""The request types each handler serves: per API, the union of the request classes (kio's,
protocol/controlled_shutdown.py's) of the versions its handler module declares (`@api`), and the
version families and nested structs it declares.

Written by `python -m samsa.broker.handlers.request_types` from those declarations: do not edit.
Only for the type checker: handlers import these names under `TYPE_CHECKING`. mypy reads each
`Versions[key, first, last]` (or `Versions[key, first, last, Literal["Nested"]]`) as the union of
those versions' request classes (or nested classes) through tools/mypy_request_types.py.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from .request_types import Versions

'''


class Versions:
    """`Versions[key, first, last]` in requests.py: the union of the request classes of versions
    first..last of API `key`; `Versions[key, first, last, Literal["Nested"]]`: of their nested
    classes of that name. A row of a table that the mypy plugin tools/mypy_request_types.py
    expands; never subscripted at run time (only the type checker imports requests.py)."""


def _row(name: str, key: int, versions: tuple[int, int], nested: str | None = None) -> str:
    args = ", ".join([str(key), str(versions[0]), str(versions[1])]
                     + ([f'Literal["{nested}"]'] if nested else []))
    row = f"{name}: TypeAlias = Versions[{args}]"
    return row if len(row) <= WIDTH else f"{name}: TypeAlias = Versions[\n    {args}\n]"


def render(declared: list[ApiDeclaration]) -> str:
    rows: dict[str, str] = {}
    for d in declared:
        rows[f"{d.name}Request"] = _row(f"{d.name}Request", d.key, d.versions)
        for family, versions in d.families.items():
            rows[family] = _row(family, d.key, versions)
        for struct, cls in d.structs.items():
            rows[struct] = _row(struct, d.key, d.versions, cls)
    return HEADER + "\n".join(rows[name] for name in sorted(rows)) + "\n"


def main() -> int:
    from samsa.broker.apis import declarations

    TARGET.write_text(render([d for d, _ in declarations()]))
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
