"""What the A/B scripts (consume_ab.py, produce_ab.py) share: a variant to measure (a name, a
source tree, broker settings) with the figures of its runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)


@dataclass
class Variant:
    name: str
    tree: Path
    settings: list[str]
    kafka: bool = False  # Apache Kafka instead of Samsa (consume_ab.py --kafka; no settings)
    mbps: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    cpu_per_gb: list[float] = field(default_factory=list)


def parse_variant(spec: str) -> Variant:
    """NAME[@TREE]=K=V,K=V (settings may be empty)."""
    head, _, settings = spec.partition("=")
    name, _, tree = head.partition("@")
    return Variant(name, Path(tree) if tree else bench.REPO,
                   [s for s in settings.split(",") if s])
