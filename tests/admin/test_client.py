"""broker/admin/client.py's pieces that need no broker: SCRAM's client side against RFC 7677's
example exchange, and the settings read from --command-config files and JAAS strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.admin.client import AdminError, Scram, Settings, load_properties


def test_scram_sha_256_follows_rfc_7677s_example() -> None:
    """RFC 7677 section 3: user "user", password "pencil"; the client proof and the server
    signature are the RFC's."""
    scram = Scram("SCRAM-SHA-256", "user", "pencil")
    scram.nonce = "rOprNGfwEbeRWgbNEkqO"
    server_nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    sent: list[bytes] = []

    def server(message: bytes) -> bytes:
        sent.append(message)
        if len(sent) == 1:
            return f"r={server_nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
        return b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

    scram.run(server)
    assert sent == [b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                    f"c=biws,r={server_nonce},"
                    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()]


def test_scram_refuses_a_wrong_server_signature() -> None:
    scram = Scram("SCRAM-SHA-512", "u=,x", "p")
    replies = iter([f"r={scram.nonce}abc,s=c2FsdA==,i=4096".encode(), b"v=AAAA"])
    first: list[bytes] = []

    def server(message: bytes) -> bytes:
        first.append(message)
        return next(replies)

    with pytest.raises(AdminError, match="signature"):
        scram.run(server)
    assert first[0].startswith(b"n,,n=u=3D=2Cx,r=")  # RFC 5802's escaping of = and ,


def test_command_config_and_jaas(tmp_path: Path) -> None:
    f = tmp_path / "admin.properties"
    f.write_text("# comment\n! another\n\nsecurity.protocol = sasl_ssl\n"
                 "sasl.mechanism:SCRAM-SHA-512\n"
                 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule '
                 'required username="carol" password="s=cret";\n')
    props = load_properties(str(f))
    assert props["security.protocol"] == "sasl_ssl" and props["sasl.mechanism"] == "SCRAM-SHA-512"
    s = Settings({**props, "bootstrap.servers": "a:1, b:2"})
    assert (s.bootstrap, s.protocol, s.sasl, s.tls) == (["a:1", "b:2"], "SASL_SSL", True, True)
    assert (s.username, s.password) == ("carol", "s=cret")
    s = Settings({**props, "bootstrap.servers": "a:1", "sasl.password": "other"})
    assert (s.username, s.password) == ("carol", "other")
    with pytest.raises(AdminError, match="security.protocol"):
        Settings({"bootstrap.servers": "a:1", "security.protocol": "TLS"})
    f.write_text("no separator here\n")
    with pytest.raises(AdminError, match="no '='"):
        load_properties(str(f))
