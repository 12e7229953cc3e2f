"""The REST API as Confluent's clients see it: paths, bodies, the content type and the error
codes, on a real broker's registry."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from .conftest import RegistryBroker

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Rest:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.headers["Content-Type"].startswith(CONTENT_TYPE)
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            assert e.headers["Content-Type"].startswith(CONTENT_TYPE)
            return e.code, json.loads(e.read())

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        assert status == 200, answer
        return answer

    def error(self, method: str, path: str, body: Any = None) -> tuple[int, int]:
        status, answer = self.call(method, path, body)
        assert status != 200, answer
        assert isinstance(answer["message"], str)
        return status, answer["error_code"]


@pytest.fixture
def rest(shared_registry: RegistryBroker) -> Rest:
    return Rest(shared_registry.url)


@pytest.fixture
def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def avro(*fields: str) -> dict[str, Any]:
    doc = {"type": "record", "name": "R",
           "fields": [{"name": f, "type": "string", "default": ""} for f in fields]}
    return {"schema": json.dumps(doc)}


def test_register_reuses_the_id_of_an_identical_schema(rest: Rest, subject: str) -> None:
    first = rest.ok("POST", f"/subjects/{subject}/versions", avro("a"))
    again = rest.ok("POST", f"/subjects/{subject}/versions", avro("a"))
    other = rest.ok("POST", f"/subjects/{subject}-2/versions", avro("a"))
    assert first["id"] == again["id"] == other["id"]
    assert rest.ok("GET", f"/subjects/{subject}/versions") == [1]  # no second version
    # the same schema written otherwise (spacing, key order) is the same schema
    spaced = {"schema": json.dumps(json.loads(avro("a")["schema"]), indent=3, sort_keys=True)}
    assert rest.ok("POST", f"/subjects/{subject}/versions", spaced)["id"] == first["id"]


def test_lookup_and_schema_by_id(rest: Rest, subject: str) -> None:
    sid = rest.ok("POST", f"/subjects/{subject}/versions", avro("a"))["id"]
    found = rest.ok("POST", f"/subjects/{subject}", avro("a"))
    assert (found["subject"], found["version"], found["id"]) == (subject, 1, sid)
    assert rest.error("POST", f"/subjects/{subject}", avro("b")) == (404, 40403)
    assert rest.error("POST", f"/subjects/{subject}-none", avro("a")) == (404, 40401)
    by_id = rest.ok("GET", f"/schemas/ids/{sid}")
    assert json.loads(by_id["schema"]) == json.loads(avro("a")["schema"])
    assert "schemaType" not in by_id  # AVRO, the default, is left out as Confluent does
    assert subject in rest.ok("GET", f"/schemas/ids/{sid}/subjects")
    assert {"subject": subject, "version": 1} in rest.ok("GET", f"/schemas/ids/{sid}/versions")
    assert rest.error("GET", "/schemas/ids/999999") == (404, 40403)
    assert sorted(rest.ok("GET", "/schemas/types")) == ["AVRO", "JSON", "PROTOBUF"]


def test_versions(rest: Rest, subject: str) -> None:
    for fields in (("a",), ("a", "b")):
        rest.ok("POST", f"/subjects/{subject}/versions", avro(*fields))
    latest = rest.ok("GET", f"/subjects/{subject}/versions/latest")
    assert latest["version"] == 2 == rest.ok("GET", f"/subjects/{subject}/versions/-1")["version"]
    assert rest.ok("GET", f"/subjects/{subject}/versions/1/schema")["name"] == "R"  # the text
    assert rest.error("GET", f"/subjects/{subject}/versions/3") == (404, 40402)
    assert rest.error("GET", f"/subjects/{subject}/versions/zero") == (422, 42202)
    assert rest.error("GET", f"/subjects/{subject}-none/versions/1") == (404, 40401)
    assert subject in rest.ok("GET", "/subjects")
    assert rest.ok("GET", f"/subjects?subjectPrefix={subject}") == [subject]
    listed = rest.ok("GET", f"/schemas?subjectPrefix={subject}")
    assert [(s["subject"], s["version"]) for s in listed] == [(subject, 1), (subject, 2)]
    latest_only = rest.ok("GET", f"/schemas?subjectPrefix={subject}&latestOnly=true")
    assert [s["version"] for s in latest_only] == [2]
    assert rest.ok("GET", "/contexts") == ["."]


def test_invalid_schemas(rest: Rest, subject: str) -> None:
    path = f"/subjects/{subject}/versions"
    assert rest.error("POST", path, {"schema": "{not json"}) == (422, 42201)
    assert rest.error("POST", path, {"schema": '{"type": 1}', "schemaType": "JSON"}) == (
        422, 42201)
    assert rest.error("POST", path, {"schema": "message {", "schemaType": "PROTOBUF"}) == (
        422, 42201)
    assert rest.error("POST", path, {"schema": "{}", "schemaType": "XML"}) == (422, 42201)


def test_soft_and_hard_deletes(rest: Rest, subject: str) -> None:
    for fields in (("a",), ("a", "b"), ("a", "b", "c")):
        rest.ok("POST", f"/subjects/{subject}/versions", avro(*fields))
    sid = rest.ok("GET", f"/subjects/{subject}/versions/1")["id"]
    # a version: soft first, then permanent
    assert rest.error("DELETE", f"/subjects/{subject}/versions/1?permanent=true") == (404, 40407)
    assert rest.ok("DELETE", f"/subjects/{subject}/versions/1") == 1
    assert rest.error("DELETE", f"/subjects/{subject}/versions/1") == (404, 40406)
    assert rest.ok("GET", f"/subjects/{subject}/versions") == [2, 3]
    assert rest.ok("GET", f"/subjects/{subject}/versions?deleted=true") == [1, 2, 3]
    assert rest.ok("GET", f"/subjects/{subject}/versions/1?deleted=true")["version"] == 1
    assert rest.ok("GET", f"/schemas/ids/{sid}")["id"] == sid  # still readable by id
    assert rest.ok("DELETE", f"/subjects/{subject}/versions/1?permanent=true") == 1
    assert rest.ok("GET", f"/subjects/{subject}/versions?deleted=true") == [2, 3]
    # the subject: soft first, then permanent
    assert rest.error("DELETE", f"/subjects/{subject}?permanent=true") == (404, 40405)
    assert rest.ok("DELETE", f"/subjects/{subject}") == [2, 3]
    assert rest.error("DELETE", f"/subjects/{subject}") == (404, 40404)
    assert subject not in rest.ok("GET", "/subjects")
    assert subject in rest.ok("GET", "/subjects?deleted=true")
    assert rest.error("GET", f"/subjects/{subject}/versions") == (404, 40401)
    assert rest.ok("DELETE", f"/subjects/{subject}?permanent=true") == [2, 3]
    assert subject not in rest.ok("GET", "/subjects?deleted=true")
    # registering again after a soft delete starts no compatibility with the deleted versions
    assert rest.ok("POST", f"/subjects/{subject}/versions", avro("z"))["version"] == 1


def test_config(rest: Rest, subject: str) -> None:
    assert rest.ok("GET", "/config")["compatibilityLevel"] == "BACKWARD"
    assert rest.error("GET", f"/config/{subject}") == (404, 40408)
    assert rest.ok("GET", f"/config/{subject}?defaultToGlobal=true") == {
        "compatibilityLevel": "BACKWARD"}
    assert rest.ok("PUT", f"/config/{subject}", {"compatibility": "full"}) == {
        "compatibility": "FULL"}
    assert rest.ok("GET", f"/config/{subject}") == {"compatibilityLevel": "FULL"}
    assert rest.error("PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"}) == (
        422, 42203)
    rest.ok("POST", f"/subjects/{subject}/versions", avro("a"))
    # FULL: a field without a default can be neither added nor removed
    no_default = {"schema": json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string", "default": ""}, {"name": "x", "type": "int"}]})}
    assert rest.error("POST", f"/subjects/{subject}/versions", no_default) == (409, 409)
    assert rest.ok("DELETE", f"/config/{subject}") == {"compatibilityLevel": "FULL"}
    assert rest.error("GET", f"/config/{subject}") == (404, 40408)


def test_compatibility_endpoint(rest: Rest, subject: str) -> None:
    rest.ok("POST", f"/subjects/{subject}/versions", avro("a"))
    path = f"/compatibility/subjects/{subject}/versions"
    assert rest.ok("POST", f"{path}/latest", avro("a", "b")) == {"is_compatible": True}
    no_default = {"schema": json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "x", "type": "int"}]})}
    verbose = rest.ok("POST", f"{path}/1?verbose=true", no_default)
    assert verbose["is_compatible"] is False
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in verbose["messages"][0]
    assert rest.ok("POST", path, no_default)["is_compatible"] is False
    assert rest.error("POST", f"{path}/7", avro("a")) == (404, 40402)
    # nothing to be incompatible with
    assert rest.ok("POST", f"/compatibility/subjects/{subject}-new/versions/latest",
                   avro("a")) == {"is_compatible": True}


def test_mode(rest: Rest, subject: str) -> None:
    assert rest.ok("GET", "/mode") == {"mode": "READWRITE"}
    assert rest.error("GET", f"/mode/{subject}") == (404, 40409)
    assert rest.ok("PUT", f"/mode/{subject}", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert rest.error("POST", f"/subjects/{subject}/versions", avro("a")) == (422, 42205)
    assert rest.error("PUT", f"/mode/{subject}", {"mode": "SIDEWAYS"}) == (422, 42204)
    assert rest.ok("DELETE", f"/mode/{subject}") == {"mode": "READONLY"}
    assert rest.ok("POST", f"/subjects/{subject}/versions", avro("a"))["version"] == 1
    # IMPORT keeps the ids and versions given, on a subject that has none yet
    assert rest.error("PUT", f"/mode/{subject}", {"mode": "IMPORT"}) == (422, 42205)
    imported = f"{subject}-import"
    rest.ok("PUT", f"/mode/{imported}", {"mode": "IMPORT"})
    body = avro("q") | {"id": 900000 + uuid.uuid4().int % 99999, "version": 7}
    answer = rest.ok("POST", f"/subjects/{imported}/versions", body)
    assert (answer["id"], answer["version"]) == (body["id"], 7)


def test_references(rest: Rest, subject: str) -> None:
    address = {"type": "record", "name": "Address", "namespace": "x",
               "fields": [{"name": "city", "type": "string"}]}
    rest.ok("POST", f"/subjects/{subject}-address/versions", {"schema": json.dumps(address)})
    user = {"type": "record", "name": "User", "namespace": "x",
            "fields": [{"name": "home", "type": "x.Address"}]}
    ref = {"name": "x.Address", "subject": f"{subject}-address", "version": 1}
    uid = rest.ok("POST", f"/subjects/{subject}/versions",
                  {"schema": json.dumps(user), "references": [ref]})["id"]
    assert rest.ok("GET", f"/schemas/ids/{uid}")["references"] == [ref]
    assert rest.ok("GET", f"/subjects/{subject}-address/versions/1/referencedby") == [uid]
    # without its reference the schema does not parse; a referenced version stays
    assert rest.error("POST", f"/subjects/{subject}-2/versions", {"schema": json.dumps(user)}) == (
        422, 42201)
    assert rest.error("DELETE", f"/subjects/{subject}-address/versions/1") == (422, 42206)
    assert rest.error("DELETE", f"/subjects/{subject}-address") == (422, 42206)


def test_protobuf_text_is_served_serialized_on_request(rest: Rest, subject: str) -> None:
    """confluent-kafka's Protobuf deserializer asks for format=serialized: the base64
    FileDescriptorProto, also of a schema registered as .proto text (as Java clients do)."""
    text = 'syntax = "proto3";\npackage shop;\nmessage Order { string id = 1; }\n'
    sid = rest.ok("POST", f"/subjects/{subject}/versions",
                  {"schema": text, "schemaType": "PROTOBUF"})["id"]
    assert rest.ok("GET", f"/schemas/ids/{sid}")["schema"] == text
    serialized = rest.ok("GET", f"/schemas/ids/{sid}?format=serialized")["schema"]
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert (fd.package, [m.name for m in fd.message_type]) == ("shop", ["Order"])
    latest = rest.ok("GET", f"/subjects/{subject}/versions/latest?format=serialized")
    assert latest["schema"] == serialized and latest["schemaType"] == "PROTOBUF"


def test_protobuf_registered_serialized_is_served_as_text(rest: Rest, subject: str) -> None:
    """What confluent-kafka's Python serializer registers (base64) reads as .proto text by
    default, as Confluent's registry serves it (its Java deserializer parses that)."""
    fd = descriptor_pb2.FileDescriptorProto(name="o.proto", package="shop", syntax="proto3")
    order = fd.message_type.add(name="Order")
    order.field.add(name="code", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    encoded = base64.b64encode(fd.SerializeToString()).decode()
    sid = rest.ok("POST", f"/subjects/{subject}/versions",
                  {"schema": encoded, "schemaType": "PROTOBUF"})["id"]
    assert rest.ok("GET", f"/schemas/ids/{sid}")["schema"] == (
        'syntax = "proto3";\npackage shop;\nmessage Order {\n  string code = 1;\n}\n')
    with urllib.request.urlopen(f"{rest.url}/schemas/ids/{sid}/schema", timeout=30) as resp:
        assert resp.read().decode() == rest.ok("GET", f"/schemas/ids/{sid}")["schema"]
    served = rest.ok("GET", f"/schemas/ids/{sid}?format=serialized")["schema"]
    assert descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(served)).message_type[0].name == "Order"
