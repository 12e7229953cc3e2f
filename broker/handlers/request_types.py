"""Writes requests.py, the request types the handlers are typed with, from the handler modules'
declarations (broker/handlers/declare.py): a table with, for each API, `<Name>Request` (the
union of the request classes of the versions it declares) and the version families and nested
structs it declares, one line each, that the mypy plugin tools/mypy_request_types.py expands.
tests/handlers/test_declarations.py checks that requests.py is what this writes.

    python -m samsa.broker.handlers.request_types          # rewrite requests.py
"""

from __future__ import annotations

import operator
import sys
from functools import reduce
from pathlib import Path
from typing import Any, get_args

from samsa.protocol.codec import request_type

from .declare import ApiDeclaration

TARGET = Path(__file__).with_name("requests.py")
WIDTH = 100

HEADER = '''\
"""The request types each handler serves, one line per API: written by
`python -m samsa.broker.handlers.request_types` from the handlers' `@api` declarations (do not
edit); that module says what each `Versions[...]` line stands for.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from .request_types import Versions

'''


class Versions:
    """`Versions[key, first, last]` in requests.py: the union of the request classes of versions
    first..last of API `key`; `Versions[key, first, last, Literal["Nested"]]`: of their nested
    classes of that name. The mypy plugin tools/mypy_request_types.py reads the same table
    for the type checker."""

    def __class_getitem__(cls, row: tuple[Any, ...]) -> Any:
        key, first, last, *nested = row
        classes = [request_type(key, v) for v in range(first, last + 1)]
        if nested:
            (name,) = get_args(nested[0])
            classes = [getattr(sys.modules[c.__module__], name) for c in classes]
        return reduce(operator.or_, classes)


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
