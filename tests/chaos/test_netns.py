"""The partition lab itself (tests/chaos/netns.py), with plain TCP listeners instead of
brokers: who reaches whom under each kind of cut, after healing, and that teardown leaves
nothing behind. Skips where network namespaces cannot be made."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.chaos.netns import BROKER_PORT, NetLab, unavailable_reason

# One worker at a time changes the host's network (tests/support/xdist_units.py).
pytestmark = pytest.mark.xdist_group("host-network")

ZK_PORT = 2181
# Listens until killed; prints once it does.
SERVER = ("import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, "
          "socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64); "
          "print('up', flush=True)\nwhile True: s.accept()[0].close()")
# Connects from argv[1] to each HOST:PORT in argv[2:]; prints the reachable ones.
PROBE = ("import socket,sys\nfor t in sys.argv[2:]:\n h, p = t.split(':')\n"
         " s = socket.socket(); s.settimeout(0.5)\n try:\n"
         "  s.bind((sys.argv[1], 0)); s.connect((h, int(p))); print(t)\n"
         " except OSError: pass\n finally: s.close()")


@pytest.fixture
def lab() -> Iterator[NetLab]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with NetLab(3) as lab:
        servers = [_serve(lab.placement(i)["command_prefix"], lab.broker_host(i), BROKER_PORT)
                   for i in range(3)]
        servers.append(_serve([], lab.zookeeper_host, ZK_PORT))
        try:
            yield lab
        finally:
            for s in servers:
                s.kill()
                s.wait()
    assert not lab.leftovers()


def _serve(prefix: list[str], host: str, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*prefix, sys.executable, "-c", SERVER, host, str(port)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    return proc


def reachable(lab: NetLab) -> set[str]:
    """Every working path, as "from->to" over c (clients), z (ZooKeeper) and brokers 0-2."""
    ends = {"z": f"{lab.zookeeper_host}:{ZK_PORT}",
            **{str(i): f"{lab.broker_host(i)}:{BROKER_PORT}" for i in range(3)}}
    sources = {"c": ([], lab.client_host), "z": ([], lab.zookeeper_host),
               **{str(i): (lab.placement(i)["command_prefix"], lab.broker_host(i))
                  for i in range(3)}}
    seen = set()
    for src, (prefix, addr) in sources.items():
        # ZooKeeper and the clients share the root namespace: no path between them to cut
        targets = {dst: t for dst, t in ends.items() if dst != src and src + dst != "cz"}
        out = subprocess.run([*prefix, sys.executable, "-c", PROBE, addr, *targets.values()],
                             capture_output=True, text=True, check=True).stdout.split()
        seen |= {f"{src}->{dst}" for dst, t in targets.items() if t in out}
    return seen


def test_cuts_are_symmetric_and_heal(lab: NetLab) -> None:
    everything = reachable(lab)
    assert everything == {"c->0", "c->1", "c->2", "z->0", "z->1", "z->2", "0->z", "1->z",
                          "2->z", "0->1", "0->2", "1->0", "1->2", "2->0", "2->1"}

    def without(*paths: str) -> set[str]:
        return everything - set(paths)

    lab.isolate(0)
    assert reachable(lab) == without("c->0", "z->0", "0->z", "0->1", "0->2", "1->0", "2->0")
    lab.heal()
    assert reachable(lab) == everything
    lab.cut_brokers(1, [2])
    assert reachable(lab) == without("1->2", "2->1")
    lab.heal()
    lab.cut_brokers(2, [0, 1])
    assert reachable(lab) == without("2->0", "2->1", "0->2", "1->2")
    lab.heal()
    lab.cut_zookeeper(1)
    assert reachable(lab) == without("1->z", "z->1")
    lab.heal()
    lab.drop_listener_replies(0)  # nobody hears broker 0's listener; it still reaches out
    deaf = without("c->0", "z->0", "1->0", "2->0")
    assert reachable(lab) == deaf
    lab.cut_zookeeper(0)
    assert reachable(lab) == deaf - {"0->z"}
    lab.heal_addresses(0)
    assert reachable(lab) == deaf
    lab.heal()
    assert reachable(lab) == everything and not lab.cuts


# Receives UDP datagrams on argv[1]:argv[2] for argv[3] seconds; prints each one.
UDP_SINK = ("import socket,sys\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.bind((sys.argv[1], int(sys.argv[2]))); s.settimeout(float(sys.argv[3]))\n"
            "print('up', flush=True)\ntry:\n while True: print(s.recv(100).decode(), flush=True)\n"
            "except OSError: pass")
UDP_SEND = ("import socket,sys\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.bind((sys.argv[1], 0))\nfor _ in range(3): s.sendto(b'hi', (sys.argv[2], 9999))")


def _datagram_arrives(lab: NetLab, src: int, dst: int) -> bool:
    sink = subprocess.Popen([*lab.placement(dst)["command_prefix"], sys.executable, "-c",
                             UDP_SINK, lab.broker_host(dst), "9999", "1.0"],
                            stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None and sink.stdout.readline().strip() == "up"
    subprocess.run([*lab.placement(src)["command_prefix"], sys.executable, "-c", UDP_SEND,
                    lab.broker_host(src), lab.broker_host(dst)], check=True)
    out, _ = sink.communicate(timeout=10)
    return "hi" in out


def test_cut_off_both_ways_and_outbound_only(lab: NetLab) -> None:
    everything = reachable(lab)
    cut = {"z->0", "0->z", "0->1", "0->2", "1->0", "2->0"}  # TCP needs both ways
    lab.cut_off(0)
    assert reachable(lab) == everything - cut  # clients still reach it
    assert not _datagram_arrives(lab, 1, 0) and not _datagram_arrives(lab, 0, 1)
    lab.heal()
    lab.cut_off(0, outbound_only=True)
    assert reachable(lab) == everything - cut
    # what the peers send still arrives; what it sends does not
    assert _datagram_arrives(lab, 1, 0) and not _datagram_arrives(lab, 0, 1)
    lab.heal()
    assert reachable(lab) == everything and _datagram_arrives(lab, 0, 1) and not lab.cuts
