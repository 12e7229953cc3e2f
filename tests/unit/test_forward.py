"""Forward[T]: a read-only attribute that reads another object's (config/forward.py)."""

from __future__ import annotations

import pytest

from samsa.config.forward import Forward


class _Offsets:
    def __init__(self) -> None:
        self.high_watermark = 0


class _Log:
    def __init__(self) -> None:
        self.offsets = _Offsets()

    high_watermark = Forward[int]("offsets.high_watermark", "The HW, as the offsets hold it.")


class _Partition:
    def __init__(self, log: _Log) -> None:
        self.log = log

    high_watermark = Forward[int]("log.high_watermark")
    offsets = Forward[_Offsets]("log.offsets")


def test_reads_follow_the_source_through_dotted_paths() -> None:
    log = _Log()
    p = _Partition(log)
    log.offsets.high_watermark = 7
    assert (log.high_watermark, p.high_watermark, p.offsets) == (7, 7, log.offsets)
    p.log = _Log()  # a replaced object is read from the next time
    assert p.high_watermark == 0


def test_read_only_and_documented() -> None:
    p = _Partition(_Log())
    with pytest.raises(AttributeError):
        p.high_watermark = 3  # type: ignore[assignment]
    assert _Log.__dict__["high_watermark"].__doc__ == "The HW, as the offsets hold it."
    assert _Partition.__dict__["high_watermark"].__doc__ == "`self.log.high_watermark`"


def test_set_on_a_class_after_its_creation_still_reads() -> None:
    forward = Forward[int]("log.high_watermark")
    _Partition.later = forward  # type: ignore[attr-defined]  # no __set_name__: __get__ reads
    p = _Partition(_Log())
    assert p.later == 0  # type: ignore[attr-defined]
    assert _Partition.later is forward  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        forward.__set__(p, 1)
