"""The image's entry point: `samsa serve` configured by environment variables, as the Kafka
images are (Bitnami's KAFKA_CFG_*), and the image's health check.

    docker run -e KAFKA_CFG_LOG_RETENTION_HOURS=24 samsa     serve, log.retention.hours=24
    docker run samsa serve --set num.partitions=3            flags after serve come last
    docker run samsa dump-log /var/lib/samsa/...             any other samsa command, as is

SAMSA_CFG_<NAME> or KAFKA_CFG_<NAME> sets the broker property <name>, lower case with `_`
read as `.` (KAFKA_CFG_ADVERTISED_LISTENERS: advertised.listeners); SAMSA_CFG_ wins over
KAFKA_CFG_ for the same property. Defaults: listeners PLAINTEXT://0.0.0.0:9092, advertised as
PLAINTEXT://localhost:9092, log.dirs /var/lib/samsa (the image's volume), node.id 0. The
broker refuses a property it does not know, so a misspelt variable stops the container instead
of being ignored.

`entrypoint.py healthcheck` asks the first listener for ApiVersions (which needs no
authentication) and exits 0 when the broker answers it without error. Which listener: the one
the command started with (flags such as docker-compose.yml's --listen included), kept in
LISTENER_FILE by the entry point, else the environment's.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import sys
from collections.abc import Mapping

PREFIXES = ("KAFKA_CFG_", "SAMSA_CFG_")  # the later wins
LISTENER_FILE = "/tmp/samsa-listeners"
DEFAULTS = {
    "listeners": "PLAINTEXT://0.0.0.0:9092",
    # as Apache Kafka's image: `docker run -p 9092:9092` serves a client on the host as it is
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "log.dirs": "/var/lib/samsa",
    "node.id": "0",
}


def properties(env: Mapping[str, str]) -> dict[str, str]:
    """The broker properties the environment sets, over the image's defaults."""
    props = dict(DEFAULTS)
    for prefix in PREFIXES:
        for name, value in sorted(env.items()):
            if name.startswith(prefix) and len(name) > len(prefix):
                props[name[len(prefix):].lower().replace("_", ".")] = value
    return props


def serve_command(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """`samsa serve --set k=v ...` with the environment's properties before the flags given;
    any other samsa command unchanged."""
    if argv and argv[0] != "serve":
        return ["samsa", *argv]
    sets = [arg for k, v in properties(env).items() for arg in ("--set", f"{k}={v}")]
    return ["samsa", "serve", *sets, *argv[1:]]


def effective(command: list[str]) -> dict[str, str]:
    """The properties `samsa serve ...` sets by its flags, in order (a later one wins), read by
    samsa's own parser."""
    from samsa.broker.cli import make_parser
    from samsa.config.loader import parse_override

    props: dict[str, str] = {}
    for prop, value in make_parser().parse_args(command[1:]).overrides:
        if prop is None:
            prop, value = parse_override(value)
        props[prop] = value
    return props


def _first_listener(props: Mapping[str, str]) -> tuple[str, str, int]:
    """(security protocol, host, port) of the first listener, the host one to reach from
    inside the container."""
    protocols = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                 "SASL_SSL": "SASL_SSL"}
    for pair in props.get("listener.security.protocol.map", "").split(","):
        if ":" in pair:
            name, protocol = pair.split(":", 1)
            protocols[name.strip().upper()] = protocol.strip().upper()
    first = props["listeners"].split(",")[0].strip()
    name, _, address = first.partition("://")
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return protocols.get(name.upper(), "PLAINTEXT"), host, int(port)


def api_versions_ok(protocol: str, host: str, port: int, timeout: float = 5) -> bool:
    """ApiVersions v0 by hand: True when the broker answers with error code 0."""
    header = struct.pack(">hhih", 18, 0, 1, len(b"healthcheck")) + b"healthcheck"
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock: socket.socket = raw
        if protocol.endswith("SSL"):  # the broker's certificate is not what is checked here
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(raw, server_hostname=host)
        sock.sendall(struct.pack(">i", len(header)) + header)
        size = struct.unpack(">i", _read(sock, 4))[0]
        correlation, error = struct.unpack_from(">ih", _read(sock, size))
    return correlation == 1 and error == 0


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def main(argv: list[str]) -> int:
    if argv[:1] == ["healthcheck"]:
        try:
            return 0 if api_versions_ok(*_first_listener(_started_with())) else 1
        except (OSError, ValueError, struct.error) as exc:
            print(f"healthcheck: {exc}", file=sys.stderr)
            return 1
    command = serve_command(argv, os.environ)
    if command[1] == "serve":
        props = effective(command)
        with open(LISTENER_FILE, "w") as f:
            for key in ("listeners", "listener.security.protocol.map"):
                f.write(f"{key}={props.get(key, '')}\n")
    os.execvp(command[0], command)


def _started_with() -> dict[str, str]:
    try:
        with open(LISTENER_FILE) as f:
            return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except FileNotFoundError:
        return properties(os.environ)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
