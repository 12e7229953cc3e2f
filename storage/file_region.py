"""A byte range of a segment file, sent to a socket later (Fetch's zero-copy path).

`LogSegment.read(..., zero_copy=True)` answers a large read with a `FileRegion` instead of the
bytes: the Fetch response carries it like any records value (its length is known), and the
socket layer (broker/network/server.py) hands it to the kernel with `os.sendfile` on a plaintext
connection, or reads it (`read`) where it cannot (TLS).

The region pins its file's fd in the fd cache (storage/fdcache.py) from creation until
`release` (or until it is garbage): the fd is neither evicted nor closed meanwhile, so a
segment deleted between the read and the send is still sent whole from the open file, as
Kafka's FileRecords sends from its open channel. A segment truncated meanwhile is shorter than
the region: `read` then raises `RegionTruncated`, and so must a sender that finds the file
ending early (Kafka's FileRecords.writeTo throws, and the connection is closed, since the
response's length was already announced)."""

from __future__ import annotations

import os

from samsa.storage.fdcache import CachedFile


class RegionTruncated(OSError):
    """The file ends before the region does: it was truncated after the read."""


class FileRegion:
    __slots__ = ("__weakref__", "_fd", "file", "position", "size")

    def __init__(self, file: CachedFile, position: int, size: int) -> None:
        self.file = file
        self.position = position
        self.size = size
        self._fd: int | None = None
        self._fd = file.acquire()  # the pin, held until release()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion({self.file.path}, {self.position}+{self.size})"

    @property
    def fd(self) -> int:
        """The file's fd, valid until `release`."""
        if self._fd is None:
            raise ValueError(f"{self!r} was released")
        return self._fd

    def read_at(self, offset: int, size: int) -> bytes:
        """`size` bytes from `offset` within the region (RegionTruncated if the file ends
        before them)."""
        data = os.pread(self.fd, size, self.position + offset)
        if len(data) < size:
            raise RegionTruncated(f"{self.file.path} ends at {self.position + offset + len(data)}"
                                  f", inside {self!r}")
        return data

    def read(self) -> bytes:
        """The region's bytes (where sendfile cannot be used)."""
        return self.read_at(0, self.size)

    def release(self) -> None:
        """Unpin the fd: the region is sent, or dropped. Idempotent."""
        if self._fd is not None:
            self._fd = None
            self.file.release()

    def __del__(self) -> None:
        self.release()


__all__ = ["FileRegion", "RegionTruncated"]
