"""`samsa console` as a user starts it: the command serves the pages on --listen, --read-only
refuses a post, and SIGTERM stops it cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.support.broker import BrokerProcess, free_port


def get(url: str, data: bytes | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, data=data, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_samsa_console_command(cluster: BrokerProcess) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "samsa.broker.cli", "console", "-b",
                             cluster.bootstrap, "--listen", f"127.0.0.1:{port}",
                             "--read-only"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"samsa console on {url}/")
        status, body = get(url + "/")
        assert status == 200 and cluster.bootstrap in body and 'id="read-only"' in body
        status, body = get(url + "/topics", data=b"name=t&partitions=1")
        assert status == 403 and "The console is read-only" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.communicate()[0]
