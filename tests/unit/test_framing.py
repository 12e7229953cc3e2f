"""protocol/framing.py: the ApiVersions fallback body (KIP-511)."""

from __future__ import annotations

from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.serial import entity_reader

from protocol.errors import ErrorCode
from protocol.framing import API_VERSIONS_KEY, api_versions_unsupported


def test_api_versions_unsupported_is_a_v0_response() -> None:
    body = api_versions_unsupported(4)
    response, end = entity_reader(ApiVersionsResponse)(body, 0)
    assert end == len(body)
    assert response.error_code == ErrorCode.unsupported_version
    [api] = response.api_keys
    assert (api.api_key, api.min_version, api.max_version) == (API_VERSIONS_KEY, 0, 4)
