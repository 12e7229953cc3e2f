"""What a TLS listener's read and write sides cost per GB by TLS record size, in one process
and without the network: a client's records decrypted by a server SSL object over memory BIOs
as uvloop's SSL transport does it (read into a buffer while the BIO or the SSL object holds
bytes), and a Fetch answer encrypted (one write, the outgoing BIO read once).

The process's CPU time (time.process_time) over the server side alone, so another process's
load moves it less than a broker's CPU per GB; ssl.SSLObject against the listener contexts'
DirectSSLObject (broker/security/tls.py), alternating. librdkafka sends a 1 KiB-record Produce
as records of about 2.2 KB (one a buffer segment); 16 KiB is TLS's largest record.

    .venv/bin/python bench/tls_records.py
    .venv/bin/python bench/tls_records.py --sizes 2200,16384 --rounds 7 --mib 128
"""

from __future__ import annotations

import argparse
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from samsa.broker.security.tls import DirectSSLObject  # noqa: E402

CHUNK = 256 * 1024  # what uvloop reads from a socket at most at once (SSL_READ_MAX_SIZE)


def contexts(work: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    key, cert = work / "key.pem", work / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(cert)
    return server, client


def connected(server: ssl.SSLContext, client: ssl.SSLContext, cls: type[ssl.SSLObject]
              ) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.SSLObject, ssl.MemoryBIO,
                         ssl.MemoryBIO]:
    """(client, its outgoing BIO, server, its incoming BIO, its outgoing BIO), handshake done."""
    server.sslobject_class = cls
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (c, s):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    s.write(b"x")  # both sides past the handshake (TLS 1.3's tickets read by the client)
    c_in.write(s_out.read())
    c.read(1)
    return c, c_out, s, s_in, s_out


def decrypt_cost(server: ssl.SSLContext, client: ssl.SSLContext, cls: type[ssl.SSLObject],
                 record: int, mib: int) -> float:
    """CPU seconds per GB for the server to decrypt `mib` MiB sent as `record`-byte writes."""
    c, c_out, s, s_in, _ = connected(server, client, cls)
    payload = os.urandom(record)
    wire = []
    for _ in range(mib * 2**20 // record):
        c.write(payload)
        if c_out.pending >= CHUNK:
            wire.append(c_out.read(CHUNK))
    wire.append(c_out.read())
    buffer = bytearray(1 << 20)
    read, pending = s.read, s.pending
    t0 = time.process_time()
    for chunk in wire:
        s_in.write(chunk)
        try:
            while s_in.pending + pending() > 0:
                read(len(buffer), buffer)
        except ssl.SSLWantReadError:
            pass
    return (time.process_time() - t0) / (mib * 2**20 / 1e9)


def encrypt_cost(server: ssl.SSLContext, client: ssl.SSLContext, cls: type[ssl.SSLObject],
                 answer: int, mib: int) -> float:
    """CPU seconds per GB for the server to encrypt `mib` MiB of `answer`-byte Fetch answers."""
    _, _, s, _, s_out = connected(server, client, cls)
    data = os.urandom(answer)
    t0 = time.process_time()
    for _ in range(mib * 2**20 // answer):
        s.write(data)
        s_out.read()
    return (time.process_time() - t0) / (mib * 2**20 / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2200,16384", help="record sizes to decrypt (bytes)")
    ap.add_argument("--answer", type=int, default=1 << 20, help="a Fetch answer's size")
    ap.add_argument("--mib", type=int, default=64, help="MiB each run moves")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-tls-records-"))
    server, client = contexts(work)
    classes: list[type[ssl.SSLObject]] = [ssl.SSLObject, DirectSSLObject]
    print(f"{ssl.OPENSSL_VERSION}; load average {os.getloadavg()[0]:.1f}")
    results: dict[str, list[float]] = {}
    for r in range(args.rounds):
        for cls in classes if r % 2 == 0 else classes[::-1]:
            for size in (int(s) for s in args.sizes.split(",")):
                cost = decrypt_cost(server, client, cls, size, args.mib)
                results.setdefault(f"decrypt {size:6d} B records  {cls.__name__}", []).append(cost)
            cost = encrypt_cost(server, client, cls, args.answer, args.mib)
            results.setdefault(f"encrypt {args.answer:6d} B answers  {cls.__name__}",
                               []).append(cost)
    for key, values in sorted(results.items()):
        print(f"{key:45} {statistics.median(values):6.3f} s/GB  "
              f"({min(values):.3f}-{max(values):.3f})")


if __name__ == "__main__":
    main()
