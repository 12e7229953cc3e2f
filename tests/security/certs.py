"""Test certificates made with the openssl command line: a CA, a broker certificate for
127.0.0.1, and client certificates (for mutual TLS)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

BROKER_EXT = "subjectAltName=IP:127.0.0.1,DNS:localhost\n"  # the broker certificates' names
# A CA's key usage, which Python 3.13's ssl.create_default_context requires of a CA (its
# VERIFY_X509_STRICT, RFC 5280), as do public CAs
CA_KEY_USAGE = "keyUsage=critical,keyCertSign,cRLSign"


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path
    both: Path  # key then certificate, one PEM file (ssl.keystore.location of type PEM)


@dataclass(frozen=True)
class Certs:
    ca: Path
    broker: Pair
    alice: Pair  # a client certificate signed by the CA
    rogue: Pair  # a client certificate signed by no CA the broker trusts
    broker_p12: Path  # the broker's key and certificate as a PKCS12 key store
    ca_p12: Path  # the CA certificate as a PKCS12 trust store
    p12_password: str


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _sign(d: Path, name: str, subject: str, ca_cert: Path, ca_key: Path,
          ext: str | None = None) -> Pair:
    key, csr, cert = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt"
    _run("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
         "-subj", subject)
    args = ["x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
            "-CAcreateserial", "-days", "2", "-out", str(cert)]
    if ext:
        extfile = d / f"{name}.ext"
        extfile.write_text(ext)
        args += ["-extfile", str(extfile)]
    _run(*args)
    both = d / f"{name}.pem"
    both.write_text(key.read_text() + cert.read_text())
    return Pair(cert, key, both)


def _ca(d: Path, name: str) -> tuple[Path, Path]:
    key, cert = d / f"{name}.key", d / f"{name}.crt"
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", f"/CN={name}", "-addext", CA_KEY_USAGE)
    return cert, key


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _ca(d, "samsa-test-ca")
    other_cert, other_key = _ca(d, "other-ca")
    broker = _sign(d, "broker", "/CN=localhost", ca_cert, ca_key, BROKER_EXT)
    alice = _sign(d, "alice", "/C=US/O=Samsa Test/OU=eng/CN=alice", ca_cert, ca_key)
    rogue = _sign(d, "rogue", "/CN=rogue", other_cert, other_key)
    password = "p12-secret"
    broker_p12, ca_p12 = d / "broker.p12", d / "ca.p12"
    _run("pkcs12", "-export", "-in", str(broker.cert), "-inkey", str(broker.key),
         "-out", str(broker_p12), "-passout", f"pass:{password}")
    _run("pkcs12", "-export", "-nokeys", "-in", str(ca_cert), "-out", str(ca_p12),
         "-passout", f"pass:{password}")
    return Certs(ca_cert, broker, alice, rogue, broker_p12, ca_p12, password)



def issue(certs: Certs, name: str, subject: str, ext: str | None = BROKER_EXT,
          by_other_ca: bool = False) -> Pair:
    """Another certificate signed by the test CA (or by the CA of `rogue`), in the same
    directory."""
    ca = other_ca(certs) if by_other_ca else certs.ca
    return _sign(certs.ca.parent, name, subject, ca, ca.with_suffix(".key"), ext)


def other_ca(certs: Certs) -> Path:
    """The certificate of the CA that signed `rogue` (trusted by no broker by default)."""
    return certs.ca.parent / "other-ca.crt"
