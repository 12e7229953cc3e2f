"""The Samsa image (Dockerfile at the repository root), for `make image` and
tests/cluster/test_docker_image.py.

    python -m tests.support.docker_image [TAG]     build it (default samsa:latest)

On the Docker engine that answers; where none does, as root, Debian's dockerd is started
for the build and stopped after it (tests/support/docker_env.py's Engine; the image stays in
its data root, /var/lib/docker, for the next engine). Where no registry serves the base image
python:3.11-slim, docker_env's Debian bookworm stand-in (debootstrap + docker import) is
tagged with that name first.
"""

from __future__ import annotations

import sys
import time

from tests.support import docker_env
from tests.support.broker import REPO_ROOT

DEFAULT_TAG = "samsa:latest"


def base_image() -> str:
    """python:3.11-slim present: "public" or "stand-in"."""
    ref = docker_env.PYTHON_IMAGE
    if not docker_env.has_image(ref) and not docker_env.pulled(ref):
        docker_env.run(["docker", "tag", docker_env.base_image(), ref])
    return "stand-in" if docker_env.standin_version(ref) else "public"


def build(tag: str = DEFAULT_TAG) -> str:
    """docker build of the repository as `tag`; the image's id."""
    base = base_image()
    t0 = time.monotonic()
    docker_env.run(["docker", "build", "-q", "-t", tag, str(REPO_ROOT)], timeout=1800)
    image_id = docker_env.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag]).stdout.strip()
    docker_env.log(f"built {tag} ({image_id[:19]}) on the {base} {docker_env.PYTHON_IMAGE} "
                   f"in {time.monotonic() - t0:.0f} s")
    return image_id


def main(argv: list[str]) -> int:
    try:
        engine = docker_env.Engine().start()
    except docker_env.DockerUnavailable as e:
        print(f"make image: {e}", file=sys.stderr)
        return 1
    try:
        build(argv[0] if argv else DEFAULT_TAG)
    finally:
        engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
