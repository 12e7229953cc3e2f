"""Run a local ZooKeeper (Debian's `zookeeper` package) for `samsa cluster` and the tests.

Debian's zkServer.sh is wired to /etc and /var; we start the server class directly with our
own zoo.cfg on loopback, and call it ready when the `srvr` four-letter word reports a mode.
`ServerTls` serves it on a TLS port only, `ServerSasl` makes every session authenticate with
SASL (DIGEST-MD5) first.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ZK_JARS = Path(os.environ.get("SAMSA_ZK_JARS", "/usr/share/java"))
_CLASSPATH = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "netty-all.jar",
    # Debian's netty-all.jar is empty (its pom names the parts): the Netty server of a TLS
    # port needs these
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-resolver.jar",
    "netty-transport.jar",
    "netty-transport-native-unix-common.jar",
)


class ZooKeeperUnavailable(RuntimeError):
    pass


def zookeeper_installed() -> bool:
    return (ZK_JARS / "zookeeper.jar").exists() and shutil.which("java") is not None


@dataclass(frozen=True)
class ServerTls:
    """A ZooKeeper served on its secureClientPort only (Netty): the server's key store
    (PKCS12 or PEM, by extension), the trust store of client certificates (PEM), and
    ssl.clientAuth (need, want or none). `client` is the SSLContext the readiness check
    connects with (a client certificate where one is needed)."""

    keystore: Path
    keystore_password: str
    truststore: Path
    client: ssl.SSLContext
    client_auth: str = "need"

    def config_lines(self) -> list[str]:
        def kind(p: Path) -> str:
            return "PKCS12" if p.suffix.lower() in (".p12", ".pfx") else "PEM"

        return [
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self.keystore}",
            f"ssl.keyStore.password={self.keystore_password}",
            f"ssl.keyStore.type={kind(self.keystore)}",
            f"ssl.trustStore.location={self.truststore}",
            f"ssl.trustStore.type={kind(self.truststore)}",
            f"ssl.clientAuth={self.client_auth}",
            # the clients' certificates name no host (a broker's names its listener)
            "ssl.clientHostnameVerification=false",
        ]


@dataclass(frozen=True)
class ServerSasl:
    """A ZooKeeper that serves only sessions authenticated with SASL: DIGEST-MD5 with the
    users (name -> password) of its JAAS `Server` section."""

    users: Mapping[str, str]

    def jaas(self) -> str:
        def quoted(v: str) -> str:
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

        options = "".join(f"\n  user_{name}={quoted(password)}"
                          for name, password in self.users.items())
        return f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required" \
               f"{options};\n}};\n"

    def config_lines(self) -> list[str]:
        return [
            "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            # 3.6+: a session that has not authenticated with SASL is closed (error -124)
            "sessionRequireClientSASLAuth=true",
        ]


class ZooKeeperProcess:
    def __init__(
        self, data_dir: Path, port: int, host: str = "127.0.0.1", tick_ms: int = 200,
        tls: ServerTls | None = None, sasl: ServerSasl | None = None,
    ) -> None:
        """`tls`: serve on `port` as the secureClientPort only (no plaintext port); `sasl`:
        require SASL of every session."""
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.tick_ms = tick_ms
        self.tls = tls
        self.sasl = sasl
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr."""
        return self.data_dir / "zookeeper.log"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    "initLimit=20",
                    "syncLimit=10",
                    f"dataDir={self.data_dir / 'data'}",
                    *([f"secureClientPort={self.port}", f"secureClientPortAddress={self.host}",
                       *self.tls.config_lines()] if self.tls else
                      [f"clientPort={self.port}", f"clientPortAddress={self.host}"]),
                    "admin.enableServer=false",  # its Jetty would grab :8080
                    "4lw.commands.whitelist=srvr,ruok,mntr",
                    "maxSessionTimeout=60000",
                    *(self.sasl.config_lines() if self.sasl else []),
                    "",
                ]
            )
        )
        return cfg

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        if not zookeeper_installed():
            raise ZooKeeperUnavailable(
                f"ZooKeeper jars not found in {ZK_JARS} (apt-get install zookeeper) or no java"
            )
        cfg = self.write_config()
        classpath = os.pathsep.join(str(ZK_JARS / j) for j in _CLASSPATH
                                    if (ZK_JARS / j).exists())
        jvm_options = []
        if self.sasl is not None:
            jaas = self.data_dir / "jaas.conf"
            jaas.write_text(self.sasl.jaas())
            jvm_options.append(f"-Djava.security.auth.login.config={jaas}")
        log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-XX:TieredStopAtLevel=1",
                *jvm_options,
                "-cp",
                classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(cfg),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ZooKeeperUnavailable(f"zookeeper exited with {self._proc.returncode}")
            if "Mode:" in four_letter_word(self.host, self.port, "srvr",
                                           self.tls.client if self.tls else None):
                return self
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperUnavailable(f"zookeeper did not serve on {self.connect_string}")

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def poll(self) -> int | None:
        """The exit code once the server has exited; None while it runs or before start()."""
        return None if self._proc is None else self._proc.poll()

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)


def four_letter_word(host: str, port: int, word: str,
                     tls: ssl.SSLContext | None = None) -> str:
    try:
        with socket.create_connection((host, port), timeout=1) as plain:
            s = tls.wrap_socket(plain, server_hostname=host) if tls else plain
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""
