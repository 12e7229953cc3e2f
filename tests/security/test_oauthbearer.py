"""SASL/OAUTHBEARER with Kafka's unsecured-JWT validator: a good token authenticates (and its
`sub` is the principal the ACLs see), an expired or under-scoped one is answered with RFC
7628's JSON error, then SASL_AUTHENTICATION_FAILED once the client sends its \\x01; a token
validator named by sasl.server.callback.handler.class replaces the default."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.protocol.wire import WireClient
from tests.support.broker import REPO_ROOT, BrokerProcess, free_port
from tests.support.java import compile_java, run_java_tool

pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredValidatorRequiredScope="kafka";')
SRC = Path(__file__).parent / "java" / "SecureClient.java"


def _with_repo_root(pythonpath: str | None) -> str:
    """The validator hook is a module of this repository (as a user's would be of theirs):
    the broker finds it on its PYTHONPATH."""
    root = str(REPO_ROOT)
    return root if not pythonpath else f"{root}{os.pathsep}{pythonpath}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, sasl, custom = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("oauth") / "data", port=plain, name="oauth",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                     f"CUSTOM://127.0.0.1:{custom}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "CUSTOM:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
        "listener.name.custom.oauthbearer.sasl.server.callback.handler.class":
            "tests.security.token_validator:validate",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "num.partitions": 1,
    }, env={"PYTHONPATH": _with_repo_root(os.environ.get("PYTHONPATH"))})
    b.sasl_port, b.custom_port = sasl, custom  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def jwt(claims: dict[str, Any]) -> str:
    def b64(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{b64({'alg': 'none'})}.{b64(claims)}."


def first_message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def authenticate(w: WireClient, token: str) -> Any:
    assert w.call(17, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
    return w.call(36, 2, {"auth_bytes": first_message(token)})


def test_unsecured_token_authenticates_until_its_expiry(broker: BrokerProcess) -> None:
    now = time.time()
    token = jwt({"sub": "alice", "iat": now, "exp": now + 60, "scope": ["kafka", "other"]})
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        r = authenticate(w, token)
        answered = time.time()
        assert (r.error_code, r.auth_bytes) == (0, b"")
        # The session lasts until the token expires (no connections.max.reauth.ms here): the
        # broker computed it between the token's making and the answer (bounds from the two
        # clocks, not a fixed 5 s, which a loaded machine can take to connect and authenticate).
        lifetime = r.session_lifetime.total_seconds()
        assert now + 60 - answered - 1 <= lifetime <= 60, (lifetime, answered - now)
        assert w.call(3, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers
    assert "authenticated as User:alice (OAUTHBEARER)" in broker.log_tail(200)


# `exp_in`: seconds from when the test runs (not from collection, which can be many minutes
# earlier in a full run) to the token's expiry; None: no `exp` claim.
@pytest.mark.parametrize("claims, exp_in, error", [
    ({"sub": "alice", "scope": "kafka"}, -5, b'{"status":"invalid_token"}'),
    ({"sub": "alice", "scope": ["other"]}, 600,
     b'{"status":"insufficient_scope", "scope":"[kafka]"}'),
    ({"sub": "alice", "scope": "kafka"}, None, b'{"status":"invalid_token"}'),  # no exp
])
def test_bad_tokens_get_the_json_error_then_fail(broker: BrokerProcess, claims: dict[str, Any],
                                                 exp_in: float | None, error: bytes) -> None:
    if exp_in is not None:
        claims = {**claims, "exp": time.time() + exp_in}
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        r = authenticate(w, jwt(claims))
        assert (r.error_code, r.auth_bytes) == (0, error)
        r = w.call(36, 2, {"auth_bytes": b"\x01"})  # the client's answer to the error
        assert r.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert r.error_message == error.decode()
        assert w.is_closed()


def test_malformed_first_message_fails_with_the_generic_message(broker: BrokerProcess
                                                                ) -> None:
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        assert w.call(17, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
        r = w.call(36, 2, {"auth_bytes": b"n,,auth=Bearer x"})
        assert r.error_code == 58
        assert r.error_message == ("Authentication failed during authentication due to "
                                   "invalid credentials with SASL mechanism OAUTHBEARER")
        assert w.is_closed()


def test_validator_hook(broker: BrokerProcess) -> None:
    """tests/security/token_validator.py accepts `good-<user>` tokens valid for 30 s."""
    with WireClient(f"127.0.0.1:{broker.custom_port}") as w:  # type: ignore[attr-defined]
        r = authenticate(w, "good-carol")
        assert r.error_code == 0 and 25 < r.session_lifetime.total_seconds() <= 30
    with WireClient(f"127.0.0.1:{broker.custom_port}") as w:  # type: ignore[attr-defined]
        # An unsecured JWT is no good there.
        r = authenticate(w, jwt({"sub": "alice", "exp": time.time() + 60, "scope": "kafka"}))
        assert r.auth_bytes == b'{"status":"invalid_token"}'
    assert "authenticated as User:carol (OAUTHBEARER)" in broker.log_tail(200)


def test_java_client_with_unsecured_login_and_acls(broker: BrokerProcess,
                                                   tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    acls = [AclBinding(rtype, "oauth-", ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
            for rtype in (ResourceType.TOPIC, ResourceType.GROUP)]
    for f in admin.create_acls(acls).values():
        f.result(timeout=20)
    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers=127.0.0.1:{broker.sasl_port}\n"  # type: ignore[attr-defined]
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        'required unsecuredLoginStringClaim_sub="alice" '
        'unsecuredLoginListClaim_scope=",kafka";\n')
    classes = compile_java([SRC], classpath="kafka4")
    res = run_java_tool("SecureClient", [str(props), "oauth-java", "10", "0"],
                        classpath="kafka4", extra_classpath=[classes], timeout=180)
    assert res.returncode == 0 and "CONSUMED 10" in res.stdout, res.describe()
    # The ACLs name User:alice: another token's principal may not write there.
    p = Producer({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                  "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": "principal=bob scope=kafka"})
    errors: list[Any] = []
    p.produce("oauth-java", b"x", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(20)
    assert errors and errors[0] is not None and errors[0].name() == \
        "TOPIC_AUTHORIZATION_FAILED", errors
