"""Network partitions for the chaos tests: one network namespace per broker on a private
bridge with no uplink, and `tc` rules that silently drop packets between chosen addresses.

    root namespace                          broker namespaces
    bridge scb<sfx>: .1 clients, .2 ZooKeeper
      ├─ veth sc<sfx>v0 ──────────────────── eth0 .10  (broker 0)
      ├─ veth sc<sfx>v1 ──────────────────── eth0 .11  (broker 1)
      └─ veth sc<sfx>v2 ──────────────────── eth0 .12  (broker 2)

The test clients connect from the bridge's first address, ZooKeeper listens on its second
one, so a broker can be cut from ZooKeeper while clients still reach it. Every cut lives on
the broker's own link and is symmetric: its namespace side drops what it sends to the other
end, its bridge side drops what the other end sends to it. Dropping (not refusing) is what a
real partition looks like: senders see timeouts, not errors.

The kernels this runs on may lack the `drop` action (act_gact), so a dropped packet is
classified by a u32 filter into an HTB class whose queue is a pfifo of length 0.

Names carry the creating pid and a random suffix, so parallel runs do not collide and
`cleanup_stale` can remove what a killed run left behind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from tests.cluster.cluster import BrokerPlacement

PREFIX = "samsa-chaos"
_NS_RE = re.compile(rf"^{PREFIX}-(\d+)-([0-9a-f]{{6}})-b\d+$")
_ALIAS_RE = re.compile(rf"^{PREFIX}:(\d+):([0-9a-f]{{6}})$")
BROKER_PORT = 9092  # every broker has an address of its own
DROP_CLASS = "1:1"
CUT_PRIO, LISTENER_PRIO = "1", "2"  # tc filter priorities: address cuts, listener drops
LISTENER_DROP = "listener replies dropped"
Side = tuple[tuple[str, ...], str]  # a tc command prefix and the device it shapes


class NetnsError(RuntimeError):
    pass


def run(*cmd: str) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {res.stderr.strip() or res.returncode}")
    return res.stdout


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    out = run("ip", "-j", "netns", "list").strip()
    return [n["name"] for n in json.loads(out)] if out else []


def _used_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for r in json.loads(run("ip", "-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = r.get("dst", "default")
        if dst != "default":
            nets.append(ipaddress.ip_network(dst, strict=False))
    for link in json.loads(run("ip", "-j", "-4", "addr") or "[]"):
        for a in link.get("addr_info", []):
            nets.append(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return nets


def pick_subnet() -> ipaddress.IPv4Network:
    """A random 10.213.N.0/24 that overlaps no route or address on this machine."""
    used = _used_networks()
    free = [n for n in (ipaddress.ip_network(f"10.213.{i}.0/24") for i in range(256))
            if not any(n.overlaps(u) for u in used)]
    if not free:
        raise NetnsError("every 10.213.N.0/24 overlaps a route of this machine")
    return free[secrets.randbelow(len(free))]


def cleanup_stale() -> list[str]:
    """Remove the namespaces, bridges and veths of runs whose process is gone. Their brokers
    died with them (PR_SET_PDEATHSIG). Returns what was removed."""
    removed = []
    for ns in _namespaces():
        m = _NS_RE.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            with contextlib.suppress(NetnsError):
                run("ip", "netns", "delete", ns)
                removed.append(f"netns {ns}")
    for link in json.loads(run("ip", "-j", "link", "show") or "[]"):
        m = _ALIAS_RE.match(link.get("ifalias", ""))
        if m and not _pid_alive(int(m.group(1))):
            for port in _bridge_ports(link["ifname"]):
                with contextlib.suppress(NetnsError):
                    run("ip", "link", "delete", port)
            with contextlib.suppress(NetnsError):
                run("ip", "link", "delete", link["ifname"])
                removed.append(f"bridge {link['ifname']}")
    removed += _remove_stale_rules()
    return removed


def _remove_stale_rules() -> list[str]:
    """FORWARD rules of labs whose process is gone (see NetLab._accept_bridged_traffic)."""
    if shutil.which("iptables") is None:
        return []
    removed = []
    with contextlib.suppress(NetnsError):
        for line in run("iptables", "-w", "-S", "FORWARD").splitlines():
            args = shlex.split(line)
            if args[:1] != ["-A"] or "--comment" not in args:
                continue
            m = _ALIAS_RE.match(args[args.index("--comment") + 1])
            if m and not _pid_alive(int(m.group(1))):
                run("iptables", "-w", "-D", *args[1:])
                removed.append(f"iptables rule {m.group(0)}")
    return removed


def _bridge_ports(bridge: str) -> list[str]:
    out = run("ip", "-j", "link", "show", "master", bridge)
    return [p["ifname"] for p in json.loads(out or "[]")]


def unavailable_reason() -> str | None:
    """None if partitions can be made here, else why not (for a skip or a warning)."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (run as root to partition brokers)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no `{tool}` binary (iproute2) on PATH"
    try:
        with NetLab(1):
            pass
    except (NetnsError, OSError, subprocess.SubprocessError) as exc:
        return f"cannot make a network namespace lab: {exc}"
    return None


@dataclass
class Cut:
    broker: int
    peers: list[str]  # addresses cut from the broker; [] = everything
    what: str  # for the timeline


@dataclass
class NetLab:
    """`with NetLab(3) as lab:` builds the lab and always tears it down."""

    size: int
    suffix: str = field(default_factory=lambda: secrets.token_hex(3))
    cuts: list[Cut] = field(default_factory=list)
    leaked_pids: list[int] = field(default_factory=list)  # see nemesis.partitionable_cluster

    def __post_init__(self) -> None:
        if not 1 <= self.size <= 100:
            raise ValueError("1..100 brokers")
        self.subnet: ipaddress.IPv4Network | None = None
        self._made: list[tuple[str, ...]] = []  # teardown commands, in reverse order

    # ------------------------------------------------------------------ names
    @property
    def bridge(self) -> str:
        return f"scb{self.suffix}"

    def veth(self, i: int) -> str:
        return f"sc{self.suffix}v{i}"

    def namespace(self, i: int) -> str:
        return f"{PREFIX}-{os.getpid()}-{self.suffix}-b{i}"

    def _addr(self, n: int) -> str:
        assert self.subnet is not None, "the lab is not built"
        return str(self.subnet.network_address + n)

    @property
    def client_host(self) -> str:
        return self._addr(1)

    @property
    def zookeeper_host(self) -> str:
        return self._addr(2)

    def broker_host(self, i: int) -> str:
        return self._addr(10 + i)

    def placement(self, i: int) -> BrokerPlacement:
        """Where broker i runs, for tests.cluster.cluster.Cluster(placement=...)."""
        return {"host": self.broker_host(i), "port": BROKER_PORT,
                "command_prefix": ["ip", "netns", "exec", self.namespace(i)]}

    # ------------------------------------------------------------------ build / tear down
    def __enter__(self) -> NetLab:
        try:
            self.create()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def create(self) -> NetLab:
        cleanup_stale()
        self.subnet = pick_subnet()
        prefix = self.subnet.prefixlen
        self._do(("ip", "link", "add", self.bridge, "type", "bridge"),
                 ("ip", "link", "delete", self.bridge))
        run("ip", "link", "set", "dev", self.bridge, "alias",
            f"{PREFIX}:{os.getpid()}:{self.suffix}")
        run("ip", "addr", "add", f"{self.client_host}/{prefix}", "dev", self.bridge)
        run("ip", "addr", "add", f"{self.zookeeper_host}/{prefix}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        self._accept_bridged_traffic()
        for i in range(self.size):
            self._add_broker(i, prefix)
        return self

    def _accept_bridged_traffic(self) -> None:
        """Let broker-to-broker packets cross the bridge whatever the host's firewall says.
        With br_netfilter loaded, bridged frames go through iptables' FORWARD chain, and a
        Docker engine on the machine sets its policy to DROP: followers then never reach
        their leaders. The rule names this lab, so cleanup_stale can remove it."""
        if shutil.which("iptables") is None:
            return
        rule = ("FORWARD", "-i", self.bridge, "-o", self.bridge, "-m", "comment",
                "--comment", f"{PREFIX}:{os.getpid()}:{self.suffix}", "-j", "ACCEPT")
        self._do(("iptables", "-w", "-I", *rule), ("iptables", "-w", "-D", *rule))

    def _add_broker(self, i: int, prefix: int) -> None:
        ns, veth = self.namespace(i), self.veth(i)
        self._do(("ip", "netns", "add", ns), ("ip", "netns", "delete", ns))
        run("ip", "-n", ns, "link", "set", "lo", "up")
        # Deleting one end of a veth pair deletes both, even while the namespace lives on.
        self._do(("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                  "netns", ns), ("ip", "link", "delete", veth))
        run("ip", "link", "set", veth, "master", self.bridge)
        run("ip", "link", "set", veth, "up")
        run("ip", "-n", ns, "addr", "add", f"{self.broker_host(i)}/{prefix}", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        for tc, dev in self._sides(i):
            _add_drop_class(tc, dev)

    def _do(self, cmd: tuple[str, ...], undo: tuple[str, ...]) -> None:
        run(*cmd)
        self._made.append(undo)

    def teardown(self) -> None:
        """Undo everything (idempotent). Processes left in a namespace are reported, not
        killed: they are the caller's (close the cluster and ZooKeeper first)."""
        errors = []
        while self._made:
            try:
                run(*self._made.pop())
            except NetnsError as exc:
                errors.append(str(exc))
        self.cuts.clear()
        if errors:
            raise NetnsError("teardown: " + "; ".join(errors))

    def leftovers(self) -> list[str]:
        """Namespaces and links of this lab that still exist (empty after teardown)."""
        left = [ns for ns in _namespaces() if self.suffix in ns]
        links = json.loads(run("ip", "-j", "link", "show") or "[]")
        return left + [lk["ifname"] for lk in links if self.suffix in lk["ifname"]]

    def pids(self) -> list[int]:
        """Processes in the lab's namespaces."""
        out: list[int] = []
        for ns in _namespaces():
            if self.suffix in ns:
                out += [int(p) for p in run("ip", "netns", "pids", ns).split()]
        return out

    # ------------------------------------------------------------------ partitions
    def _sides(self, i: int) -> tuple[Side, Side]:
        """Broker i's link as tc sees it: its namespace end, then its bridge end."""
        return (("tc", "-n", self.namespace(i)), "eth0"), (("tc",), self.veth(i))

    def cut(self, i: int, peers: list[str], what: str) -> None:
        """Drop every IPv4 packet between broker i and `peers` (all addresses if empty)."""
        self.cuts.append(Cut(i, list(peers), what))  # first: heal() undoes a partial cut too
        ns_side, bridge_side = self._sides(i)
        for addr in peers or ["0.0.0.0/0"]:
            _drop(ns_side, "dst", addr)  # what the broker sends to addr
            _drop(bridge_side, "src", addr)  # what addr sends to the broker

    def isolate(self, i: int) -> None:
        self.cut(i, [], "isolated from everyone")

    def cut_brokers(self, i: int, others: list[int]) -> None:
        self.cut(i, [self.broker_host(j) for j in others],
                 "cut from broker" + ("s " if len(others) > 1 else " ")
                 + ",".join(map(str, others)))

    def cut_off(self, i: int, outbound_only: bool = False) -> None:
        """Cut broker i from ZooKeeper and from every other broker; clients still reach it
        (a broker that keeps serving while the cluster has moved on without it).

        `outbound_only` drops only what the broker sends them, as an iptables OUTPUT rule
        on the broker's host does: what they send still arrives (the new controller's
        LeaderAndIsr and UpdateMetadata, followers' fetches), none of its answers or ACKs
        leave."""
        others = [self.broker_host(j) for j in range(self.size) if j != i]
        if not outbound_only:
            self.cut(i, [self.zookeeper_host, *others], "cut from ZooKeeper and all peers")
            return
        self.cuts.append(Cut(i, [self.zookeeper_host, *others],
                             "what it sends to ZooKeeper and all peers dropped"))
        ns_side, _ = self._sides(i)
        for addr in [self.zookeeper_host, *others]:
            _drop(ns_side, "dst", addr)

    def cut_zookeeper(self, i: int) -> None:
        self.cut(i, [self.zookeeper_host], "cut from ZooKeeper")

    def drop_listener_replies(self, i: int) -> None:
        """Drop every packet broker i's listener sends (replies, SYN-ACKs, ACKs): requests
        still reach it but nobody hears back, while its own outgoing connections (to other
        brokers' listeners, to ZooKeeper) work both ways."""
        self.cuts.append(Cut(i, [], LISTENER_DROP))
        (tc, dev), _ = self._sides(i)
        run(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio",
            LISTENER_PRIO, "u32", "match", "ip", "sport", str(BROKER_PORT), "0xffff",
            "flowid", DROP_CLASS)

    def heal_addresses(self, i: int) -> None:
        """Lift broker i's cuts by address (cut, isolate, cut_zookeeper, ...); a listener drop
        stays."""
        for tc, dev in self._sides(i):
            run(*tc, "filter", "del", "dev", dev, "parent", "1:", "prio", CUT_PRIO)
        self.cuts = [c for c in self.cuts if c.broker != i or c.what == LISTENER_DROP]

    def destroy_listener_sockets(self, i: int) -> int:
        """Destroy the TCP sockets of broker i's port in its namespace: those a killed broker
        leaves to its kernel, which would retransmit what they held once a cut heals. Returns
        how many are left (TIME-WAIT ones hold nothing and do not count)."""
        ns, port = self.namespace(i), f"( sport = :{BROKER_PORT} )"
        run("ip", "netns", "exec", ns, "ss", "-K", "-tan", port)
        left = run("ip", "netns", "exec", ns, "ss", "-Htan", "exclude", "time-wait", port)
        return len(left.splitlines())

    def heal(self) -> None:
        for i in sorted({c.broker for c in self.cuts}):
            for tc, dev in self._sides(i):
                run(*tc, "filter", "del", "dev", dev, "parent", "1:")
        self.cuts.clear()


def _add_drop_class(tc: tuple[str, ...], dev: str) -> None:
    """An HTB root whose unclassified traffic passes untouched, and a class that drops all it
    gets (a pfifo of length 0): packets a filter sends there are lost."""
    run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb")
    run(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", DROP_CLASS, "htb",
        "rate", "1mbit")
    run(*tc, "qdisc", "add", "dev", dev, "parent", DROP_CLASS, "handle", "10:", "pfifo",
        "limit", "0")


def _drop(side: Side, direction: str, addr: str) -> None:
    tc, dev = side
    cidr = addr if "/" in addr else f"{addr}/32"
    run(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", CUT_PRIO,
        "u32", "match", "ip", direction, cidr, "flowid", DROP_CLASS)
