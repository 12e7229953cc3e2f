"""The advertised API versions do not move by accident: the ApiVersions answer of a new
in-process broker, every version of it, is byte for byte the snapshot in
api_versions_snapshot.json (taken before the API table was derived from the handler modules'
declarations). A deliberate change of a version range updates the snapshot with
`SAMSA_UPDATE_SNAPSHOT=1 pytest tests/handlers/test_api_versions_snapshot.py`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from samsa.protocol.codec import build, request_type, response_type
from samsa.protocol.encoder import encode_response

SNAPSHOT = Path(__file__).with_name("api_versions_snapshot.json")
API_VERSIONS = 18


async def _answers(handlers) -> dict[str, str]:
    spec = handlers.registry.get(API_VERSIONS)
    out = {}
    for version in range(spec.min_version, spec.max_version + 1):
        ctx = handlers.context("ApiVersions", version)
        result = await spec.handler(ctx, build(request_type(API_VERSIONS, version), {}))
        parts, _ = encode_response(response_type(API_VERSIONS, version), result)
        out[f"v{version}"] = b"".join(bytes(p) for p in parts).hex()
    return out


async def test_api_versions_answer_is_the_snapshot(handlers):
    answers = await _answers(handlers)
    if os.environ.get("SAMSA_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(json.dumps(answers, indent=1) + "\n")
    assert answers == json.loads(SNAPSHOT.read_text())
