"""protocol/: the ApiVersions fallback body (KIP-511), nullable structs in the request guard."""

from __future__ import annotations

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.serial import entity_reader

from samsa.protocol.codec import build, encode, reader, request_type
from samsa.protocol.errors import ErrorCode
from samsa.protocol.framing import API_VERSIONS_KEY, api_versions_unsupported
from samsa.protocol.guard import MalformedRequest, NotNormal, check_request
from samsa.protocol.lenient import decode_request


def test_api_versions_unsupported_is_a_v0_response() -> None:
    body = api_versions_unsupported(4)
    response, end = entity_reader(ApiVersionsResponse)(body, 0)
    assert end == len(body)
    assert response.error_code == ErrorCode.unsupported_version
    [api] = response.api_keys
    assert (api.api_key, api.min_version, api.max_version) == (API_VERSIONS_KEY, 0, 4)


@pytest.mark.parametrize("cursor", [None, {"topic_name": "t", "partition_index": 3}])
def test_guard_walks_a_nullable_struct(cursor: dict[str, object] | None) -> None:
    # DescribeTopicPartitions v0's cursor: a KIP-893 nullable struct (marker byte, then the
    # struct), walked as kio reads it.
    entity = request_type(75, 0)
    raw = encode(build(entity, {"topics": [{"name": "a"}], "response_partition_limit": 5,
                                "cursor": cursor}))
    check_request(entity, raw, 0)
    assert reader(entity)(raw, 0)[1] == len(raw)
    with pytest.raises(MalformedRequest):
        check_request(entity, raw[:-2], 0)
    bad = bytearray(raw)
    bad[raw.index(b"\x00\x00\x00\x05") + 4] = 0x02  # neither -1 nor 1
    # Kafka reads any marker >= 0 as a present struct: the guard hands the frame to the
    # lenient reader, which reads it so (and refuses it where no struct follows).
    with pytest.raises(NotNormal, match="nullable struct marker 2"):
        check_request(entity, bytes(bad), 0)
    if cursor is None:
        with pytest.raises(MalformedRequest):
            decode_request(entity, reader(entity), bytes(bad), 0)
    else:
        request = decode_request(entity, reader(entity), bytes(bad), 0)
        assert request == reader(entity)(raw, 0)[0]
