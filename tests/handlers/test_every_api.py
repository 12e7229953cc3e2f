"""Every API the broker serves has handler specs here: a call of it by name in a test module of
this package (issue 48: tests that read as a spec)."""

from __future__ import annotations

import re
from pathlib import Path

from samsa.broker.apis import build_registry


def test_every_served_api_is_called_by_a_spec():
    text = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py")
                     if p.name != Path(__file__).name)
    called = set(re.findall(r'call\(\s*"(\w+)"', text))
    missing = [s.name for s in build_registry().all() if s.name not in called]
    assert missing == []
