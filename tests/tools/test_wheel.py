"""The wheel installs one import name, `samsa`, and `samsa serve` runs from it.

The wheel is built from a copy of this checkout's packaged files (`pip wheel --no-deps`) and
installed with `--no-deps` into a fresh venv under tmp_path. The runtime dependencies are not
downloaded again: a `.pth` file puts the site-packages of the interpreter running the tests on
the new venv's path as a plain directory (its own .pth files, such as an editable install's
finder, are not run), so the new venv sees kio, uvloop, ... but not this checkout. The broker
then runs from the venv's `bin/samsa` in an empty working directory, without PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import time
import venv
import zipfile
from pathlib import Path

import pytest

from samsa.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "config", "coordinator", "protocol", "storage")


def _source_copy(dest: Path) -> Path:
    """What the Dockerfile copies: pyproject.toml, setup.py, README.md, samsa/ and the five
    folders. Building from a copy leaves no build/ or samsa.egg-info in the
    checkout (where the egg-info would pass for an installed samsa on PYTHONPATH)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("samsa", *PACKAGES):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


def _build_wheel(out: Path) -> Path:
    src = _source_copy(out.parent / "src")
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
            "-w", str(out), str(src)]
    # without build isolation where the venv can build wheels itself (no download); else pip
    # fetches setuptools and wheel for an isolated build
    res = subprocess.run([*base, "--no-build-isolation"], capture_output=True, text=True,
                         env=_clean_env())
    if res.returncode != 0:
        res = subprocess.run(base, capture_output=True, text=True, env=_clean_env())
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = out.glob("samsa-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(base / "dist")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    py = env_dir / "bin" / "python"
    res = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
         "-q", "--disable-pip-version-check", str(wheel)], capture_output=True, text=True,
        env=_clean_env())  # a checkout on PYTHONPATH (its samsa.egg-info) is no install
    assert res.returncode == 0, res.stdout + res.stderr
    site = Path(subprocess.check_output(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True, env=_clean_env()).strip())
    (site / "zz_test_runtime_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return wheel, env_dir


def test_wheel_has_one_top_level_name(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        top_level = z.read(f"{dist_info}/top_level.txt").decode().split()
        entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {"samsa", dist_info}
    assert top_level == ["samsa"]
    for pkg in PACKAGES:  # the five folders, with their files, under samsa/
        assert f"samsa/{pkg}/__init__.py" in names
        n_files = len(list((ROOT / pkg).rglob("*.py")))
        assert len([n for n in names if n.startswith(f"samsa/{pkg}/")
                    and n.endswith(".py")]) == n_files
    assert "samsa/config/broker.yaml" in names
    assert "samsa/config/schema/properties.toml" in names  # the broker's property table
    assert "samsa/testing/__init__.py" in names
    assert "samsa = samsa.broker.cli:main" in entry_points
    assert "samsa = samsa._pytest_entry" in entry_points


def test_installed_site_packages_has_only_samsa(installed: tuple[Path, Path]) -> None:
    _, env_dir = installed
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    ours = {p.name for p in site.iterdir()} - {"zz_test_runtime_deps.pth", "__pycache__"}
    assert {n for n in ours if not n.endswith(".dist-info")} == {"samsa"}, sorted(ours)
    # nothing of the checkout is importable: only samsa, from the venv
    code = ("import importlib.util as u, samsa; print(samsa.__file__); "
            f"print([n for n in {PACKAGES!r} if u.find_spec(n)])")
    out = subprocess.run([str(env_dir / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, cwd=env_dir, env=_clean_env()).stdout.split("\n")
    assert out[0].startswith(str(site)), out
    assert out[1] == "[]", out


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "SAMSA_BROKER_CMD", "PYTHONHOME")}


def _api_versions(port: int) -> list[int]:
    """ApiVersions v0 by hand: the api keys the broker answers with."""
    header = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header)) + header)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(size, socket.MSG_WAITALL)
    correlation, error, n = struct.unpack_from(">ihi", body)
    assert (correlation, error) == (1, 0)
    return [struct.unpack_from(">hhh", body, 10 + 6 * i)[0] for i in range(n)]


def test_samsa_serve_runs_from_the_wheel(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, env_dir = installed
    port = free_port()
    log = tmp_path / "broker.log"
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(env_dir / "bin" / "samsa"), "serve", "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(tmp_path / "data")],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=_clean_env())
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.01)
        startup = time.perf_counter() - t0
        keys = _api_versions(port)
        assert {0, 1, 3, 18, 19} <= set(keys)
        print(f"\nsamsa serve from the installed wheel: accepting connections after "
              f"{startup:.3f} s")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    text = log.read_text()
    assert "samsa.broker.app" in text  # logger names are the installed module paths
    assert str(ROOT) not in text.replace(str(tmp_path), "")


def test_installed_plugin_is_opt_in(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """Installed, the pytest11 entry point loads nothing by itself; `samsa = true` in the
    project's pytest settings turns the fixtures on."""
    _, env_dir = installed
    (tmp_path / "test_user.py").write_text(
        "def test_broker(samsa_broker):\n"
        "    samsa_broker.create_topic('t')\n")
    ini = tmp_path / "pytest.ini"
    cmd = [str(env_dir / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    ini.write_text("[pytest]\n")
    off = subprocess.run(cmd, cwd=tmp_path, env=_clean_env(), capture_output=True, text=True)
    assert off.returncode == 1 and "fixture 'samsa_broker' not found" in off.stdout, off.stdout
    ini.write_text("[pytest]\nsamsa = true\n")
    on = subprocess.run(cmd, cwd=tmp_path, env=_clean_env(), capture_output=True, text=True)
    assert on.returncode == 0 and "1 passed" in on.stdout, on.stdout + on.stderr
    assert "samsa.testing: 1 broker start(s)" in on.stdout
