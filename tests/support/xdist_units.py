"""How `pytest -n 2 --dist loadgroup` (make test) shares the suite between its workers.

A unit of work goes to one worker whole. Here a unit is a test module, not a test: module- and
package-scoped fixtures (a shared broker, a cluster, certificates) then start once in one
worker instead of once in each, and a module's tests keep their order. Two wider units:

- a test marked `pytest.mark.xdist_group(name)` joins the unit `name`, whatever its module
  (xdist's own rule, which appends `@name` to its id): the tests that change the host's
  network (namespaces, bridges and iptables rules of tests/chaos/netns.py; the Docker engine
  and its fixed host ports) are `host-network`, so that one worker at a time does;
- every module of tests/spark is one unit: its SparkSession (a JVM of 1 GB) and brokers are
  package-scoped, and would otherwise start in both workers.

Units are handed out in collection order (tests/chaos, tests/clients and tests/cluster, the
slowest, first; the many short unit tests last, where they fill the tail of the run).
tests/conftest.py loads this plugin.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

# Directories run as one unit (package-scoped fixtures that are costly to start twice).
PACKAGE_UNITS = ("tests/spark/",)


class ModuleUnits(LoadGroupScheduling):
    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # an xdist_group mark: xdist's rule
            return nodeid.rsplit("@", 1)[-1]
        for prefix in PACKAGE_UNITS:
            if nodeid.startswith(prefix):
                return prefix
        return nodeid.split("::", 1)[0]


# tryfirst: xdist's own implementation answers for loadgroup too (firstresult).
@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ModuleUnits | None:
    """The scheduler for --dist loadgroup; None (xdist's own) for any other mode."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    # Collection order, not xdist's default of the units with most tests first (which puts
    # one-test modules of a minute each at the end, where a worker waits for them alone).
    config.option.loadscopereorder = False
    return ModuleUnits(config, log)
