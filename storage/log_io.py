"""Whether a log may still touch its files, and Kafka's maybeHandleIOException.

`LogIo` belongs to one `Log` and is shared by the parts of it that do I/O (appends, reads,
retention): an `OSError` in any of them takes the log's directory offline, reported to the
failure channel, and every later call fails at once with KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from samsa.storage.errors import KafkaStorageError
from samsa.storage.log_dir_failure import LogDirFailureChannel


class LogIo:
    def __init__(self, dir_name: str, name: str, parent_dir: str) -> None:
        self.dir_name = dir_name
        self.name = name  # `<topic>-<partition>`
        self.parent_dir = parent_dir
        # Set by the LogManager: where I/O errors are reported (None: they only raise).
        self.failure_channel: LogDirFailureChannel | None = None
        self.failed = False  # an I/O error here, or the directory closed our files

    @property
    def offline(self) -> bool:
        channel = self.failure_channel
        return self.failed or (channel is not None and self.parent_dir in channel.offline)

    def refuse(self) -> KafkaStorageError:
        return KafkaStorageError(f"{self.dir_name}: log directory {self.parent_dir} is offline")

    def io_failed(self, what: str, exc: OSError) -> KafkaStorageError:
        """Mark the log failed, report its directory; the error to raise instead of `exc`."""
        self.failed = True
        msg = f"Error while {what} {self.name} in dir {self.parent_dir}"
        if self.failure_channel is not None:
            self.failure_channel.maybe_add_offline_log_dir(self.parent_dir, msg, exc)
        return KafkaStorageError(f"{msg}: {exc}")

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """`guarded` for a few lines rather than a method."""
        if self.offline:
            raise self.refuse()
        try:
            yield
        except OSError as exc:
            raise self.io_failed(what, exc) from exc


class HasLogIo(Protocol):
    @property
    def io(self) -> LogIo: ...


S = TypeVar("S", bound=HasLogIo)
P = ParamSpec("P")
R = TypeVar("R")


def guarded(what: str) -> Callable[[Callable[Concatenate[S, P], R]],
                                   Callable[Concatenate[S, P], R]]:
    """A method of a log's part that does I/O: none at all once the directory is offline (a
    failed append may have left its file longer than the segment says, so nothing may be
    appended after it); an `OSError` inside takes the directory offline and fails the caller
    with KAFKA_STORAGE_ERROR."""

    def decorate(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(fn)
        def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            io = self.io
            if io.offline:
                raise io.refuse()
            try:
                return fn(self, *args, **kwargs)
            except OSError as exc:
                raise io.io_failed(what, exc) from exc

        return run

    return decorate


__all__ = ["HasLogIo", "LogIo", "guarded"]
