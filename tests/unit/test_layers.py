"""The layers import downward only: config < protocol < storage < coordinator < broker.

Every import is checked, including those inside functions and under `if TYPE_CHECKING:` (a
type-only import of a higher layer is still a wall broken), and relative imports are resolved
to the package they name. The product never imports the tests.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("config", "protocol", "storage", "coordinator", "broker")
RANK = {name: i for i, name in enumerate(LAYERS)}
FORBIDDEN_EVERYWHERE = ("tests",)
PREFIX = "samsa."  # the layers are imported as samsa.<layer> (the folders stay at the top)


def _top(module: str) -> str:
    """The layer (or other top-level name) an absolute module name belongs to."""
    return module.removeprefix(PREFIX).split(".")[0]


def _modules(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


def imported_modules(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in `path` (a module under `root`),
    wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                package = list(path.relative_to(root).parent.parts)
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if node.module is None or node.level:
                # `from . import x` / `from .. import x`: each name may be a module
                for alias in node.names:
                    yield node.lineno, f"{module}.{alias.name}" if module else alias.name
            yield node.lineno, module


def violations(layer: str) -> list[str]:
    out = []
    for path in _modules(layer):
        for line, module in imported_modules(path):
            top = _top(module)
            where = f"{path.relative_to(ROOT)}:{line}"
            if top in RANK and RANK[top] > RANK[layer]:
                out.append(f"{where} imports {module} ({top} is above {layer})")
            elif top in FORBIDDEN_EVERYWHERE:
                out.append(f"{where} imports {module} (the product never imports the tests)")
    return sorted(set(out))


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_downward(layer: str) -> None:
    found = violations(layer)
    if found:
        pytest.fail("imports of a higher layer:\n  " + "\n  ".join(found), pytrace=False)



def test_broker_keeps_its_modules_in_rooms() -> None:
    """broker/ is in rooms named for what they do (network, replication, cluster, txn, share,
    security, handlers); at most a dozen modules stand at its top, and every room is a package."""
    top = sorted(p.name for p in (ROOT / "broker").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, top
    rooms = [d for d in (ROOT / "broker").rglob("*") if d.is_dir() and any(d.glob("*.py"))]
    assert rooms and all((d / "__init__.py").is_file() for d in rooms), rooms


def test_the_group_coordinator_keeps_each_kind_of_group_in_a_room() -> None:
    """coordinator/group/ has a room per kind of group (classic, consumer, share, streams)
    beside what they share (the facade, the partitions, offsets and records); every room of
    coordinator/ is a package."""
    group = ROOT / "coordinator" / "group"
    kinds = {d.name for d in group.iterdir() if d.is_dir() and any(d.glob("*.py"))}
    assert kinds == {"classic", "consumer", "share", "streams"}, kinds
    rooms = [d for d in (ROOT / "coordinator").rglob("*") if d.is_dir() and any(d.glob("*.py"))]
    assert rooms and all((d / "__init__.py").is_file() for d in rooms), rooms

def test_the_admin_commands_use_only_the_protocol_and_config() -> None:
    """broker/admin/ (the `samsa topic|group|txn|acl|user|config|cluster|reassign|produce|
    consume ...` CLI) is a client of any Kafka broker: it may use protocol/'s codecs and
    config/, never the broker's or the log's internals."""
    allowed = ("samsa.protocol", "samsa.config", "samsa.broker.admin")
    found = []
    for path in sorted((ROOT / "broker" / "admin").rglob("*.py")):
        for line, module in imported_modules(path):
            if _top(module) in RANK and not module.startswith(allowed) and (
                    not module.startswith("broker.admin")):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not found, found


def test_the_console_uses_only_the_admin_client_protocol_and_config() -> None:
    """broker/console/ (`samsa console`) talks to any Kafka-compatible cluster through the
    admin client (broker/admin/), the protocol's codecs and config/, never the broker's, the
    coordinators' or the log's internals."""
    allowed = ("samsa.protocol", "samsa.config", "samsa.broker.admin", "samsa.broker.console")
    found = []
    for path in sorted((ROOT / "broker" / "console").rglob("*.py")):
        for line, module in imported_modules(path):
            if _top(module) in RANK and not module.startswith(allowed) and not (
                    module.startswith(("broker.admin", "broker.console"))):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not found, found


# ---- the checker itself ---------------------------------------------------------------------


def _check(tmp_path: Path, rel: str, source: str) -> list[str]:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    found = []
    layer = Path(rel).parts[0]
    for line, module in imported_modules(path, tmp_path):
        top = _top(module)
        if (top in RANK and RANK[top] > RANK[layer]) or top in FORBIDDEN_EVERYWHERE:
            found.append(f"{line}:{module}")
    return found


def test_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import samsa.storage.log\n"  # 3: absolute
        "from coordinator import x\n"  # 4: from-import
        "if TYPE_CHECKING:\n"
        "    from samsa.broker.app import Broker\n"  # 6: type-only
        "def f():\n"
        "    import tests.support\n"  # 8: inside a function, and the tests
        "from protocol import records\n"  # 9: same layer: fine
        "import config\n"  # 10: lower layer: fine
        "import kio.schema\n"  # 11: a library: fine
    )
    assert _check(tmp_path, "protocol/m.py", source) == [
        "3:samsa.storage.log", "4:coordinator", "6:samsa.broker.app", "8:tests.support",
    ]  # fmt: skip


def test_checker_resolves_relative_imports(tmp_path: Path) -> None:
    source = "from .. import broker\nfrom ..storage import log\nfrom . import sibling\n"
    found = _check(tmp_path, "coordinator/group/m.py", source)
    # coordinator/group/m.py: `..` is coordinator, so these stay inside coordinator.
    assert found == []
    assert _check(tmp_path, "protocol/m.py", "from .. import broker\n") == ["1:broker"]
