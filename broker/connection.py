"""A client connection's protocol: size-prefixed request frames read with as few copies as the
event loop allows, and the write side's back pressure.

A frame found whole in the bytes already read is copied out of them once, as `bytes` (small
requests; a client's pipelined requests often arrive many to one read). A frame not yet whole
when the connection's task asks for it gets a buffer of its own, the bytes read so far are
copied into it, and the kernel reads the rest straight into it (asyncio.BufferedProtocol):
a 1 MB Produce reaches the decoder with no copy of its own, where a StreamReader made three
(the loop's `bytes`, the reader's buffer, `readexactly`'s result).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import cast

# Each connection reads into a scratch buffer while it holds unread bytes, and returns it to
# a pool once empty, so an idle connection holds none. It is also the most a client can make
# the broker hold for a connection it is not reading (its task is busy, or the channel is
# muted by a throttle): reading pauses when it is full, as a StreamReader's limit does.
SCRATCH_BYTES = 1 << 16
_MIN_READ = 4096  # less room than this at the end of the scratch buffer: move the bytes back
_SPARE: list[bytearray] = []  # scratch buffers no connection holds (bounded: _MAX_SPARE)
_MAX_SPARE = 256
_PREFIX = 4

SizeOf = Callable[[bytes], int]  # a frame's size from its 4-byte prefix; raises to refuse it
Frame = bytes | memoryview  # a memoryview is read-only, over the frame's own buffer


class ClientConnection(asyncio.BufferedProtocol):
    """One connection's protocol: `read_frame` for its task, and `transport`, `drain` and
    `close` as a StreamWriter has them (what ResponseWriter writes through)."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._over_ssl = False
        # Unread bytes: _scratch[_start:_end] (no buffer while there are none).
        self._scratch: bytearray | None = None
        self._view = memoryview(b"")
        self._start = self._end = 0
        # The frame being read straight into its own buffer, _filled bytes of it so far.
        self._frame: bytearray | None = None
        self._filled = 0
        self._size_of: SizeOf | None = None  # set while the task waits for a frame
        self._waiter: asyncio.Future[Frame | None] | None = None
        self._eof = False
        self._error: BaseException | None = None  # the connection failed
        self._reading_paused = False
        self._writing_paused = False
        self._lost = False
        self._drain_waiters: deque[asyncio.Future[None]] = deque()

    # -- the connection's task -----------------------------------------------------------------
    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None
        return self._transport

    @property
    def unread_bytes(self) -> int:
        """Bytes read from the socket that no frame returned yet holds: at most
        SCRATCH_BYTES while the task is not reading."""
        return self._end - self._start + (self._filled if self._frame is not None else 0)

    async def read_frame(self, size_of: SizeOf) -> Frame:
        """The next frame. `size_of` is asked once its prefix is in, so that it judges the
        size by the connection's state after the frames before. Raises IncompleteReadError at
        the end of the stream, and what the connection failed with."""
        while True:
            frame = self._take(size_of)
            if frame is not None:
                return frame
            if self._error is not None:
                raise self._error
            if self._eof:
                unread = bytes(self._view[self._start:self._end])
                raise asyncio.IncompleteReadError(unread, None)
            waiter = self._waiter = self._loop.create_future()
            self._size_of = size_of
            try:
                frame = await waiter
            finally:
                self._waiter = None
                self._size_of = None
            if frame is not None:
                return frame

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        transport = self.transport
        if transport.is_closing():
            await asyncio.sleep(0)  # let connection_lost run first
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if not self._writing_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            self._drain_waiters.remove(waiter)

    def close(self) -> None:
        self.transport.close()

    # -- frames --------------------------------------------------------------------------------
    def _frame_open(self) -> bool:
        return self._frame is not None and self._filled < len(self._frame)

    def _take(self, size_of: SizeOf) -> Frame | None:
        """The next frame if it is whole, else None (a frame's own buffer may have been set up
        for the rest of it)."""
        frame = self._frame
        if frame is not None:
            if self._frame_open():
                return None
            self._frame = None
            return memoryview(frame).toreadonly()
        start, end = self._start, self._end
        if end - start < _PREFIX:
            return None
        size = size_of(bytes(self._view[start:start + _PREFIX]))
        begin = start + _PREFIX
        if end - begin >= size:
            whole = bytes(self._view[begin:begin + size])
            self._consumed(begin + size)
            return whole
        frame = bytearray(size)
        frame[:end - begin] = self._view[begin:end]
        self._frame, self._filled = frame, end - begin
        self._consumed(end)
        return None

    def _consumed(self, upto: int) -> None:
        self._start = upto
        if upto == self._end:  # nothing unread: the scratch buffer goes back to the pool
            self._start = self._end = 0
            if self._scratch is not None:
                self._view = memoryview(b"")
                if len(_SPARE) < _MAX_SPARE:
                    _SPARE.append(self._scratch)
                self._scratch = None
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def _wake(self, frame: Frame | None = None, error: BaseException | None = None) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(frame)

    # -- the event loop's side -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._over_ssl = transport.get_extra_info("sslcontext") is not None

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame_open():
            assert self._frame is not None
            return memoryview(self._frame)[self._filled:]
        if self._scratch is None:
            self._scratch = _SPARE.pop() if _SPARE else bytearray(SCRATCH_BYTES)
            self._view = memoryview(self._scratch)
        start, end = self._start, self._end
        if len(self._view) - end < _MIN_READ and start > 0:
            self._view[:end - start] = self._view[start:end]
            self._start, self._end = 0, end - start
        elif end == len(self._view):  # full, yet read (reading pauses once full): grow
            self._scratch = bytearray(2 * end)
            self._scratch[:end] = self._view[:end]
            self._view = memoryview(self._scratch)
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame_open():
            assert self._frame is not None
            self._filled += nbytes
            if self._filled == len(self._frame):
                self._wake()
            return
        self._end += nbytes
        size_of = self._size_of
        waiter = self._waiter
        if size_of is not None and waiter is not None and not waiter.done():
            # The task waits: hand it the frame, or set up its own buffer now, before the
            # loop reads more of it into the scratch buffer.
            try:
                frame = self._take(size_of)
            except Exception as exc:
                self._wake(error=exc)
                return
            if frame is not None:
                self._wake(frame)
                return
        scratch = self._scratch
        if (scratch is not None and self._end - self._start >= len(scratch)
                and not self._reading_paused):
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # Keep the transport open for the answers still to be written (a half-close), as
        # StreamReaderProtocol does; TLS has no half-close.
        return not self._over_ssl

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is None:
            self._eof = True
        else:
            self._error = exc
        self._wake()
        for waiter in self._drain_waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
