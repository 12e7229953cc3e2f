"""glibc malloc settings for a process that reads 1 MiB Fetch buffers all day.

Each Fetch reads up to `max.partition.fetch.bytes` (1 MiB by default) into a new buffer that is
freed once the socket took it. glibc serves blocks that big with mmap and gives them back with
munmap unless its adaptive threshold has risen (which depends on the order of frees), so a
broker either page-faults every buffer in afresh or does not: measured with the librdkafka
consumer (400,000 × 1 KiB, docs/performance.md), broker CPU per run was 0.66 s or 0.27 s from
one start to the next. Fixed thresholds keep such buffers in the heap: 0.27-0.30 s every time.
Variables a user sets (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) win; elsewhere than
glibc this does nothing."""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20  # blocks below this come from the heap (Fetch reads are ~1 MiB)
TRIM_THRESHOLD = 64 << 20  # free memory kept at the heap's top before returning it


def tune_malloc() -> bool:
    """True if the thresholds were set."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False  # not glibc
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not ok:
        log.debug("mallopt refused the thresholds")
    return ok
