"""Helpers of the admin command tests: run `samsa ...` in-process and read what it printed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from samsa.broker import cli
from tests.groups.clients import FAST
from tests.support.broker import BrokerProcess


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.rc == 0, self.err
        return json.loads(self.out)

    def table(self) -> list[dict[str, str]]:
        """The rows of a printed table (its first line is the header) as dicts."""
        assert self.rc == 0, self.err
        return parse_table(self.out.splitlines())


def parse_table(lines: list[str]) -> list[dict[str, str]]:
    """Split each line at the header's column starts, so a misaligned column shows."""
    header = lines[0]
    names = header.split()
    starts = [header.index(f"{n}  " if i < len(names) - 1 else n)
              for i, n in enumerate(names)]
    rows = []
    for line in lines[1:]:
        if not line.strip():
            break
        cells = [line[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


Samsa = Callable[..., Run]


@pytest.fixture
def samsa(capsys: pytest.CaptureFixture[str]) -> Samsa:
    """samsa(*args, bootstrap=...) -> Run: `samsa ARGS -b BOOTSTRAP` (no -b when None)."""

    def run(*args: str, bootstrap: str | None) -> Run:
        capsys.readouterr()
        argv = [*args, *(["-b", bootstrap] if bootstrap else [])]
        rc = cli.main(argv)
        captured = capsys.readouterr()
        return Run(rc, captured.out, captured.err)

    return run


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of each module with groups that join and rebalance at once (no initial
    rebalance delay, short sessions allowed)."""
    b = BrokerProcess(tmp_path_factory.mktemp("admin-groups") / "data", name="admin-groups",
                      settings=FAST)
    b.start()
    try:
        yield b
    finally:
        b.close()
