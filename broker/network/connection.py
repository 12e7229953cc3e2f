"""A client connection's protocol: size-prefixed request frames read with as few copies as the
event loop allows, and the write side's back pressure.

A frame found whole in the bytes already read is copied out of them once, as `bytes` (small
requests; a client's pipelined requests often arrive many to one read). A frame not yet whole
when the connection's task asks for it gets a buffer of its own, the bytes read so far are
copied into it, and the kernel reads the rest straight into it (asyncio.BufferedProtocol):
a 1 MB Produce reaches the decoder with no copy of its own, where a StreamReader made three
(the loop's `bytes`, the reader's buffer, `readexactly`'s result).

Memory follows the bytes that arrive, not the size a prefix announces: a frame's own buffer
holds what arrived plus at most GROW_STEP, and grows as the rest comes in (a 1 MB Produce still
gets all of its buffer at once). Frames that need their own buffer are admitted by the broker's
MemoryPool (queued.max.request.bytes); while it is exhausted, connections that need one stop
being read, and the others' small requests are read as usual.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import cast

log = logging.getLogger(__name__)

# Each connection reads into a scratch buffer while it holds unread bytes, and returns it to
# a pool once empty, so an idle connection holds none. It is also the most a client can make
# the broker hold for a connection it is not reading (its task is busy, or the channel is
# muted by a throttle): reading pauses when it is full, as a StreamReader's limit does.
SCRATCH_BYTES = 1 << 16
_MIN_READ = 4096  # less room than this at the end of the scratch buffer: move the bytes back
_SPARE: list[bytearray] = []  # scratch buffers no connection holds (bounded: _MAX_SPARE)
_MAX_SPARE = 256
_PREFIX = 4
# A frame's own buffer is at most this far ahead of the bytes that arrived: a size prefix alone
# costs no more than this (1 MiB: a Produce of the default message.max.bytes gets its whole
# buffer at once). Growing it is cheap: realloc, with mremap for large blocks.
GROW_STEP = 1 << 20
_ZEROS = memoryview(bytes(GROW_STEP))
_LOG_INTERVAL_S = 60.0  # an exhausted MemoryPool is logged at most this often

SizeOf = Callable[[bytes], int]  # a frame's size from its 4-byte prefix; raises to refuse it
Frame = bytes | memoryview  # a memoryview is read-only, over the frame's own buffer


class MemoryPool:
    """Kafka's queued.max.request.bytes (SimpleMemoryPool, non-strict): the bytes of requests
    in flight, counted from when a frame gets its own buffer (its announced size, reserved
    whole so that an admitted frame never waits for memory half-read) until the connection's
    task asks for the next frame, or the connection is lost. A reservation is granted while
    any memory is left, so the pool can go over by one request; when none is left the
    connection waits (not read) until some is released. `capacity` <= 0: unbounded."""

    def __init__(self, capacity: int = -1) -> None:
        self.capacity = capacity
        self.used = 0
        self.depletions = 0  # times reservations started being refused
        self._depleted_total_s = 0.0
        self._dry_since: float | None = None
        self._waiting: deque[Callable[[], None]] = deque()
        self._wake_scheduled = False
        self._logged_at = -_LOG_INTERVAL_S

    @property
    def available(self) -> int:
        return self.capacity - self.used if self.capacity > 0 else -1

    @property
    def waiting(self) -> int:
        """Connections not read until memory is released."""
        return len(self._waiting)

    def depleted_seconds(self) -> float:
        """Total time reservations were being refused (Kafka's MemoryPoolDepletedTimeTotal)."""
        current = time.monotonic() - self._dry_since if self._dry_since is not None else 0.0
        return self._depleted_total_s + current

    def try_reserve(self, nbytes: int, on_released: Callable[[], None]) -> bool:
        """Reserve `nbytes`, or queue `on_released` (called once memory is released) and
        return False."""
        if self.capacity <= 0 or self.used < self.capacity:
            self.used += nbytes
            self._end_dry_spell()
            return True
        if self._dry_since is None:
            self._dry_since = time.monotonic()
            self.depletions += 1
            if self._dry_since - self._logged_at >= _LOG_INTERVAL_S:
                self._logged_at = self._dry_since
                log.warning("The memory pool for requests is exhausted (%d bytes in flight, "
                            "queued.max.request.bytes=%d): connections with a request waiting "
                            "for memory are not read until some is released", self.used,
                            self.capacity)
        self._waiting.append(on_released)
        return False

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        if self._waiting and not self._wake_scheduled:
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def forget(self, on_released: Callable[[], None]) -> None:
        """A waiting connection was lost."""
        try:
            self._waiting.remove(on_released)
        except ValueError:
            pass
        if not self._waiting:
            self._end_dry_spell()

    def _wake(self) -> None:
        self._wake_scheduled = False
        while self._waiting and (self.capacity <= 0 or self.used < self.capacity):
            self._waiting.popleft()()  # it reserves again, or queues itself again

    def _end_dry_spell(self) -> None:
        if self._dry_since is not None:
            self._depleted_total_s += time.monotonic() - self._dry_since
            self._dry_since = None


def _fresh(exc: BaseException) -> BaseException:
    """A copy of `exc` to raise: raising the stored one would chain the raising frames (and so
    the connection and its buffers) to it, a cycle only the cyclic GC frees."""
    try:
        copy = type(exc)(*exc.args)
    except Exception:
        copy = ConnectionResetError(str(exc))
    return copy



class ClientConnection(asyncio.BufferedProtocol):
    """One connection's protocol: `read_frame` for its task, and `transport`, `drain` and
    `close` as a StreamWriter has them (what ResponseWriter writes through)."""

    def __init__(self, pool: MemoryPool | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._pool = pool if pool is not None else MemoryPool()
        self._transport: asyncio.Transport | None = None
        self._over_ssl = False
        # Unread bytes: _scratch[_start:_end] (no buffer while there are none).
        self._scratch: bytearray | None = None
        self._view = memoryview(b"")
        self._start = self._end = 0
        self._size = -1  # the next frame's size, once its prefix was judged (-1: not yet)
        # The frame being read straight into its own buffer (_frame_size bytes; the buffer
        # grows as they arrive), _filled bytes of it so far.
        self._frame: bytearray | None = None
        self._frame_size = 0
        self._filled = 0
        self._reserved = 0  # bytes of the pool held for the frame being read or handed out
        self._pool_wait = False  # waiting for the pool: not read meanwhile
        self._size_of: SizeOf | None = None  # set while the task waits for a frame
        self._waiter: asyncio.Future[Frame | None] | None = None
        self._eof = False
        self._error: BaseException | None = None  # the connection failed
        self._scratch_full = False  # not read until the task takes some of the scratch buffer
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
        self._release()  # the frame before is done with
        while True:
            frame = self._take(size_of)
            if frame is not None:
                return frame
            if self._error is not None:
                raise _fresh(self._error)
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
                del waiter  # a raised exception's traceback holds this frame: no cycle
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
            del waiter  # as in read_frame

    def close(self) -> None:
        self.transport.close()

    # -- frames --------------------------------------------------------------------------------
    def _frame_open(self) -> bool:
        return self._frame is not None and self._filled < self._frame_size

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
        size = self._size
        if size < 0:
            size = self._size = size_of(bytes(self._view[start:start + _PREFIX]))
        begin = start + _PREFIX
        if end - begin >= size:
            whole = bytes(self._view[begin:begin + size])
            self._size = -1
            self._consumed(begin + size)
            return whole
        if size + _PREFIX <= SCRATCH_BYTES or self._pool_wait:
            return None  # a small frame is read whole into the scratch buffer
        if not self._pool.try_reserve(size, self._pool_released):
            self._pool_wait = True
            self._update_reading()
            return None
        self._reserved = size
        self._frame = frame = bytearray(min(size, end - begin + GROW_STEP))
        frame[:end - begin] = self._view[begin:end]
        self._frame_size, self._filled, self._size = size, end - begin, -1
        self._consumed(end)
        return None

    def _grow_frame(self) -> memoryview:
        """Room for the next bytes of the frame being read: its buffer grows by GROW_STEP once
        full (in place when nothing holds a view of it: realloc, often without a copy)."""
        frame = self._frame
        assert frame is not None
        if self._filled == len(frame):
            more = min(self._frame_size - len(frame), GROW_STEP)
            try:
                frame += _ZEROS[:more]
            except BufferError:  # a view of it is still alive somewhere: copy instead
                grown = bytearray(len(frame) + more)
                grown[:self._filled] = frame
                self._frame = frame = grown
        return memoryview(frame)[self._filled:]

    def _consumed(self, upto: int) -> None:
        self._start = upto
        if upto == self._end:  # nothing unread: the scratch buffer goes back to the pool
            self._start = self._end = 0
            self._drop_scratch()
        if self._scratch_full:
            self._scratch_full = False
            self._update_reading()

    def _drop_scratch(self) -> None:
        if self._scratch is not None:
            self._view = memoryview(b"")
            if len(_SPARE) < _MAX_SPARE and len(self._scratch) == SCRATCH_BYTES:
                _SPARE.append(self._scratch)
            self._scratch = None

    def _release(self) -> None:
        """Give back the pool's bytes of the frame handed out before (or lost)."""
        if self._reserved:
            self._pool.release(self._reserved)
            self._reserved = 0

    def _pool_released(self) -> None:
        """The pool has memory again: set up the frame's buffer now, and read on."""
        self._pool_wait = False
        if self._lost:
            return
        self._deliver()
        self._update_reading()

    def _update_reading(self) -> None:
        paused = self._scratch_full or self._pool_wait
        if paused == self._reading_paused or self._lost:
            return
        self._reading_paused = paused
        if paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def _deliver(self) -> None:
        """If the task waits: hand it the frame if whole, or set up its own buffer now,
        before the loop reads more of it into the scratch buffer."""
        size_of = self._size_of
        waiter = self._waiter
        if size_of is None or waiter is None or waiter.done():
            return
        try:
            frame = self._take(size_of)
        except Exception as exc:
            self._wake(error=exc)
            return
        if frame is not None:
            self._wake(frame)

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
            return self._grow_frame()
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
            self._filled += nbytes
            if self._filled == self._frame_size:
                self._wake()
            return
        self._end += nbytes
        self._deliver()
        scratch = self._scratch
        if (scratch is not None and self._end - self._start >= len(scratch)
                and not self._scratch_full):
            self._scratch_full = True
            self._update_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._drop_cut_frame()
        self._wake()
        # Keep the transport open for the answers still to be written (a half-close), as
        # StreamReaderProtocol does; TLS has no half-close.
        return not self._over_ssl

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is None:
            self._eof = True
        else:
            exc.__traceback__ = None  # the loop's frames: nothing to keep alive through it
            self._error = exc
            self._drop_scratch()  # unread bytes of a failed connection are never read
            self._start = self._end = 0
        self._drop_cut_frame()
        if self._pool_wait:
            self._pool_wait = False
            self._pool.forget(self._pool_released)
        self._release()
        self._wake()
        for waiter in self._drain_waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(_fresh(exc))

    def _drop_cut_frame(self) -> None:
        """The stream ended inside a frame read into its own buffer: its memory goes now."""
        if self._frame_open():
            self._frame = None
            self._filled = 0
            self._release()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
