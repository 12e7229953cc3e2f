"""Text checkpoint files in Kafka's format (`CheckpointFile`): version line, count line, then
one entry per line. Written to a temp file, fsynced and renamed so a crash leaves either the
old or the new file."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
VERSION = 0


def write_atomically(path: Path, data: bytes, *, fsync: bool = True,
                     dir_errors: bool = False) -> None:
    """Write `path` through a temp file renamed over it. With fsync, the data before the
    rename and the directory after it, whose error is raised only with `dir_errors` (the
    producer snapshots'; `fsync_dir`, as the checkpoints use it, ignores it)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        _fsync_path(path.parent, ignore_errors=not dir_errors)


def fsync_file(path: Path) -> None:
    """fsync a file written earlier without it, then its directory (for the rename)."""
    if fsync_if_exists(path):
        fsync_dir(path.parent)


def fsync_if_exists(path: Path) -> bool:
    """fsync what `path` names (a file or directory); False if it does not exist."""
    return _fsync_path(path, ignore_errors=False)


def fsync_dir(path: Path) -> None:
    _fsync_path(path, ignore_errors=True)


def _fsync_path(path: Path, *, ignore_errors: bool) -> bool:
    """fsync what `path` names; False if it does not exist (or, ignoring errors, on any)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        if ignore_errors or isinstance(exc, FileNotFoundError):
            return False
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not ignore_errors:
            raise
    finally:
        os.close(fd)
    return True


def write_entries(path: Path, lines: Iterable[str], *, fsync: bool = True) -> None:
    body = list(lines)
    text = f"{VERSION}\n{len(body)}\n" + "".join(line + "\n" for line in body)
    write_atomically(path, text.encode(), fsync=fsync)


def read_entries(path: Path, parse: Callable[[list[str]], T]) -> list[T]:
    """Parse each entry line (split on whitespace); missing file -> []. Malformed -> ValueError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError(f"malformed checkpoint file {path}")
    if int(lines[0]) != VERSION:
        raise ValueError(f"unrecognised checkpoint version {lines[0]} in {path}")
    count = int(lines[1])
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise ValueError(f"checkpoint {path} declares {count} entries but holds {len(entries)}")
    return [parse(e) for e in entries]


class OffsetCheckpointFile:
    """`<topic> <partition> <offset>` entries (recovery point, log start, replication, cleaner)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: dict[tuple[str, int], int], *, fsync: bool = True) -> None:
        write_entries(self.path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())),
                      fsync=fsync)

    def read(self) -> dict[tuple[str, int], int]:
        def parse(e: list[str]) -> tuple[tuple[str, int], int]:
            if len(e) != 3:
                raise ValueError(f"malformed checkpoint line {' '.join(e)!r} in {self.path}")
            return (e[0], int(e[1])), int(e[2])

        return dict(read_entries(self.path, parse))
