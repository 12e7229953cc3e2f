"""Which APIs Samsa serves below Kafka 4.4's version range (issue 52, "Version bumps"): read from
the request schemas in kafka-clients-4.4.0.jar (common/message/*Request.json, `make java-deps`
puts it in .cache/kafka-clients-44/lib) and compared with the versions the handlers declare. The
list must be PENDING exactly: serving a new version without taking it off PENDING fails here too, so
PENDING always says what remains. An API ApiVersions lists only with the unstable switch
(UNSTABLE_APIS) stays PENDING whatever versions it declares: Kafka 4.4 serves it by default."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import pytest

from samsa.broker.apis import declarations
from samsa.broker.cluster.features import UNSTABLE_APIS

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("SAMSA_CACHE_DIR", REPO_ROOT / ".cache"))
JAR = CACHE_DIR / "kafka-clients-44" / "lib" / "kafka-clients-4.4.0.jar"

# Served, but below Kafka 4.4's newest stable version: API name -> Kafka 4.4's newest.
PENDING: dict[str, int] = {}


def _newest_stable(schema: dict) -> int | None:
    """The last version Kafka serves without its unstable-versions switch, or None if none."""
    valid = schema["validVersions"]
    if valid == "none":
        return None
    newest = int(valid.split("-")[-1])
    return newest - 1 if schema.get("latestVersionUnstable") else newest


def _kafka_requests() -> dict[int, dict]:
    if not JAR.exists():
        pytest.skip(f"{JAR} is missing (make java-deps)")
    out = {}
    with zipfile.ZipFile(JAR) as jar:
        for name in jar.namelist():
            if name.startswith("common/message/") and name.endswith("Request.json"):
                text = re.sub(r"(?m)^\s*//.*$", "", jar.read(name).decode())  # Kafka's comments
                schema = json.loads(text)
                out[schema["apiKey"]] = schema
    return out


def test_the_apis_served_below_kafka_4_4_are_the_pending_ones():
    kafka = _kafka_requests()
    behind = {}
    for declared, _ in declarations():
        schema = kafka.get(declared.key)
        newest = None if schema is None else _newest_stable(schema)
        if newest is not None and (declared.versions[1] < newest
                                   or declared.key in UNSTABLE_APIS):
            behind[declared.name] = newest
    assert behind == PENDING
