"""The web console's fixtures: a console served in-process (its own event loop in a thread)
and Debian's Chromium driven by Playwright, one browser per test module. Screenshots are kept
as test artefacts in test-artifacts/console/<test>/ (gitignored; SAMSA_TEST_ARTIFACTS names
another folder), where they outlive pytest's rotated tmp dirs."""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.admin.client import Settings
from samsa.broker.console.app import Console, make_app
from tests.groups.clients import FAST
from tests.support.broker import BrokerProcess, free_port

CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[2]


class ConsoleServer:
    """One console (aiohttp) on a free loopback port, until close()."""

    def __init__(self, props: dict[str, str], read_only: bool = False,
                 metrics_urls: list[str] | None = None) -> None:
        from aiohttp import web

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.console = Console(Settings(props), read_only=read_only,
                               metrics_urls=metrics_urls or [])
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(make_app(self.console))
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._call(self._start())

    async def _start(self) -> None:
        from aiohttp import web

        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def close(self) -> None:
        self._call(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextmanager
def started(factory: pytest.TempPathFactory, name: str, settings: dict[str, Any],
            **kwargs: Any) -> Iterator[BrokerProcess]:
    """A broker for a module's fixture, closed on leaving."""
    b = BrokerProcess(factory.mktemp(name) / "data", name=name, settings=settings, **kwargs)
    b.start()
    try:
        yield b
    finally:
        b.close()


@contextmanager
def started_with_sasl(factory: pytest.TempPathFactory, name: str, settings: dict[str, Any]
                      ) -> Iterator[BrokerProcess]:
    """A broker with a PLAINTEXT listener (its bootstrap) and a SASL_PLAINTEXT one (its
    `sasl` attribute), for a module's fixture."""
    plain, sasl = free_port(), free_port()
    listeners = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"}
    with started(factory, name, {**listeners, **settings}, port=plain) as b:
        b.sasl = f"127.0.0.1:{sasl}"  # type: ignore[attr-defined]
        yield b


@contextmanager
def serving(props: dict[str, str], **kwargs: Any) -> Iterator[ConsoleServer]:
    """A console for a module's fixture, closed on leaving."""
    c = ConsoleServer(props, **kwargs)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One plain broker per test module."""
    with started(tmp_path_factory, "console", FAST) as b:
        yield b


@pytest.fixture(scope="module")
def console(cluster: BrokerProcess) -> Iterator[ConsoleServer]:
    """A console of `cluster` (a module with another broker overrides it)."""
    with serving({"bootstrap.servers": cluster.bootstrap}) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: make browser-deps")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    p = context.new_page()
    p.set_default_timeout(30_000)
    try:
        yield p
    finally:
        context.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Any:
    """shots(page, name): a full-page screenshot kept as a test artefact."""
    root = Path(os.environ.get("SAMSA_TEST_ARTIFACTS") or REPO / "test-artifacts")
    folder = root / "console" / re.sub(r"[^\w.-]+", "_", request.node.name)
    folder.mkdir(parents=True, exist_ok=True)

    def take(p: Any, name: str) -> Path:
        path = folder / f"{name}.png"
        p.screenshot(path=str(path), full_page=True)
        return path

    return take
