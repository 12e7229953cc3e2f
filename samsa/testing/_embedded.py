"""A broker in this process: Samsa's Broker on an event loop of its own thread, listening on a
loopback port, with request intercepts (samsa.testing._intercept) in front of its dispatcher.
See `samsa.testing.embedded_broker`."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._intercept import Answer, Intercept, Intercepted, InterceptingDispatch

if TYPE_CHECKING:
    from samsa.broker.app import Broker
    from samsa.protocol.errors import ErrorCode

T = TypeVar("T")


class EmbeddedBroker:
    """One broker on a thread of this process. Use `samsa.testing.embedded_broker(...)`."""

    def __init__(self, settings: Mapping[str, Any] | None = None, *,
                 data_dir: str | Path | None = None, port: int | None = None,
                 broker_id: int = 0) -> None:
        from samsa.testing import free_port

        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-embedded-")
            data_dir = Path(self._tmp.name) / "data"
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.broker_id = broker_id
        self.settings = dict(settings or {})
        self.broker: Broker | None = None
        self._rules: list[Intercept] = []
        self._dispatch: InterceptingDispatch | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ---- life cycle -----------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        if self._thread is not None:
            raise RuntimeError("the embedded broker is already running")
        self._started.clear()
        self._failure = None
        self._thread = threading.Thread(target=self._run, name="samsa-embedded-broker",
                                        daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError(f"the embedded broker did not start within {timeout:.0f}s")
        if self._failure is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("the embedded broker did not start") from self._failure
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """A clean shutdown (as on SIGTERM); start() again serves the same data."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"the embedded broker did not stop within {timeout:.0f}s")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - uvloop is a dependency of the broker
            loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()
            self._loop = None
            self._started.set()

    async def _serve(self) -> None:
        from samsa.broker.app import Broker
        from samsa.broker.network.signals import CloseConnection
        from samsa.config.loader import load_config

        self._stop = asyncio.Event()
        props = {"log.dirs": str(self.data_dir), "broker.id": str(self.broker_id),
                 "listeners": f"PLAINTEXT://{self.bootstrap}",
                 "offsets.topic.replication.factor": "1",
                 "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1"}
        props.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                      for k, v in self.settings.items()})
        try:
            broker = Broker(load_config(None, props))
            # in front of the dispatcher before start() hands it to the listeners
            self._dispatch = InterceptingDispatch(broker.dispatcher, self._rules,
                                                  CloseConnection)
            broker.dispatcher = self._dispatch  # type: ignore[assignment]
            await broker.start()
        except BaseException as exc:
            self._failure = exc
            return
        self.broker = broker
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await broker.stop()
            self.broker = None

    # ---- what tests do with it --------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
        from samsa.testing import create_topic

        create_topic(self.bootstrap, name, partitions, replication_factor, config, timeout)

    def run(self, fn: Callable[[Broker], T], timeout: float = 10.0) -> T:
        """fn(the running Broker), called on the broker's event loop, so that it sees the
        broker's state between two steps of the loop, never half-changed; what fn returns."""
        loop, broker = self._loop, self.broker
        if loop is None or broker is None:
            raise RuntimeError("the embedded broker is not running")

        async def call() -> T:
            return fn(broker)

        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout)

    def intercept(self, api: int | str, *, when: Callable[[Intercepted], bool] | None = None,
                  error: ErrorCode | int | None = None, delay: float = 0.0,
                  drop: bool = False, answer: Answer | None = None,
                  times: int | None = None) -> Intercept:
        """From now on, answer the requests of `api` (its key, or its name: "Produce") for
        which `when(Intercepted)` is true (all without `when`), at most `times` of them (no
        limit without), in one of these ways instead of serving them:

        - `error=ErrorCode.x` (or its number): an answer with that error in every error code of
          the response, for every topic, partition, group or key the request names;
        - `answer=f`: the response f(Intercepted) returns, a dict of the response's fields
          (fields it lacks get their defaults);
        - `drop=True`: the connection is closed, with no answer;
        - `delay=s` alone: served, s seconds late; with one of the above, it comes s seconds
          late.

        Rules are tried in the order they were made; the first that takes a request decides.
        The returned Intercept counts what it took (`hits`) and `remove()`s the rule."""
        rule = Intercept(self._api_key(api), when, error, delay, drop, answer, times)
        self._set_rules([*self._rules, rule])
        return rule

    def clear_intercepts(self) -> None:
        """Every request is served again."""
        for rule in self._rules:
            rule.remove()
        self._set_rules([])

    def _set_rules(self, rules: list[Intercept]) -> None:
        # a new list each time: the broker's thread reads the one it has, never a half-made one
        self._rules = rules
        if self._dispatch is not None:
            self._dispatch.rules = rules

    def _api_key(self, api: int | str) -> int:
        if isinstance(api, int):
            return api
        from samsa.broker.apis import build_registry

        spec = next((s for s in build_registry().all() if s.name == api), None)
        if spec is None:
            raise ValueError(f"no API named {api!r}")
        return spec.key

    def __repr__(self) -> str:
        state = "running" if self._thread is not None else "stopped"
        return f"<EmbeddedBroker {self.bootstrap} {state} data={self.data_dir}>"
