"""Find a request by its name (issue 48, item 5): each handler module declares the APIs it
serves beside their handlers and names them in its header; the dispatch table and requests.py
are derived from those declarations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from samsa.broker import apis
from samsa.broker.handlers import request_types

HANDLERS = Path(apis.__file__).resolve().parent / "handlers"
DECLARED = apis.declarations()


def test_requests_py_is_written_from_the_declarations():
    assert request_types.TARGET.read_text() == request_types.render([d for d, _ in DECLARED]), (
        "run `python -m samsa.broker.handlers.request_types`")


def test_every_module_that_declares_an_api_is_collected():
    declaring = {p.stem for p in HANDLERS.glob("*.py") if "\n@api(" in p.read_text()}
    assert declaring == {m.__name__.rsplit(".", 1)[1] for m in apis.HANDLER_MODULES}


@pytest.mark.parametrize(("declared", "function"), DECLARED, ids=lambda d: getattr(d, "name", ""))
def test_a_handler_modules_header_names_its_apis_and_keys(declared, function):
    module = function.__module__
    doc = __import__(module, fromlist=["_"]).__doc__ or ""
    assert re.search(rf"\b{declared.name}\s+\({declared.key}\b", doc), (
        f"{module}'s docstring does not name {declared.name} ({declared.key})")


def test_the_table_is_the_declarations():
    registry = apis.build_registry()
    assert [(s.key, s.name, (s.min_version, s.max_version)) for s in registry.all()] == [
        (d.key, d.name, d.versions) for d, _ in DECLARED]
    assert len(DECLARED) == len({d.name for d, _ in DECLARED})
