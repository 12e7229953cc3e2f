"""The SCRAM client a broker logs in to another with, against the broker's own SCRAM server:
the exchange completes and both sides' proofs check; a wrong password is refused."""

from __future__ import annotations

import hashlib
import os

import pytest

from samsa.broker.security.scram import (
    MECHANISMS,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_salted,
)


def _credential(mechanism: str, password: str) -> ScramCredential:
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, 4096)
    return credential_from_salted(mechanism, salted, salt, 4096)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_client_and_server_agree(mechanism: str) -> None:
    cred = _credential(mechanism, "s3cret")
    server = ScramServer(mechanism, lambda user, mech: cred if user == "bro,ker" else None)
    client = ScramClient(mechanism, "bro,ker", "s3cret")
    server_first = server.evaluate(client.first())
    server_final = server.evaluate(client.final(server_first))
    client.verify(server_final)
    assert server.complete and server.username == "bro,ker"


def test_wrong_password_is_refused() -> None:
    cred = _credential("SCRAM-SHA-512", "s3cret")
    server = ScramServer("SCRAM-SHA-512", lambda user, mech: cred)
    client = ScramClient("SCRAM-SHA-512", "broker", "wrong")
    server_first = server.evaluate(client.first())
    with pytest.raises(ScramError):
        server.evaluate(client.final(server_first))
    with pytest.raises(ScramError):  # and a forged server signature is caught by the client
        client.verify(b"v=" + b"A" * 88)
