"""Fixtures for the Spark Structured Streaming tests (the standard Kafka connector, from PySpark).

    spark          ONE SparkSession for the whole test run (local[2], UI off, loopback only),
                   with the connector jars of `make spark-deps` on `spark.jars`; package
                   scoped, and its JVM is stopped too, so that nothing of Spark outlives
                   tests/spark in a `make test` run
    spark_broker   one Samsa broker for the whole Spark suite (topics are unique per test)
    spark_cluster  three Samsa brokers joined through a ZooKeeper of their own
    offset_path    parametrizes a test over the connector's two driver-side offset readers:
                   "admin" (the default, KafkaOffsetReaderAdmin) and "consumer"
                   (spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true, group based)

The jars are looked up in $SAMSA_SPARK_JARS, else in .cache/spark-<pyspark version>/jars.
They are never resolved at run time (no Ivy, no spark.jars.packages).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster
from tests.spark.helpers import OFFSET_FETCHING_CONF, connector_jars
from tests.support.broker import BrokerProcess, free_port

# A JoinGroup of the deprecated offset reader would otherwise wait 3 s for more members.
SPARK_BROKER_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.num.partitions": 4,
}


@pytest.fixture(scope="package")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("spark-broker")
    b = BrokerProcess(base / "data", settings=SPARK_BROKER_SETTINGS, name="spark-broker")
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="package")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("spark-zookeeper"), free_port()).start()
    cluster = Cluster(zk, tmp_path_factory.mktemp("spark-cluster"), size=3)
    try:
        yield cluster.start()
    finally:
        cluster.close()
        zk.stop()


@pytest.fixture(scope="package")
def spark(
    tmp_path_factory: pytest.TempPathFactory, spark_broker: BrokerProcess
) -> Iterator[object]:
    # Depends on spark_broker only so that Spark (and the Kafka producers its sink caches in
    # the JVM, which would keep reconnecting) stops before the broker does.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    jars = connector_jars()
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("samsa-spark-tests")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        # Keep idle executor-side Kafka consumers short-lived between tests.
        .config("spark.kafka.consumer.cache.timeout", "30s")
        .config(OFFSET_FETCHING_CONF, "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        for q in session.streams.active:
            q.stop()
        session.stop()
        stop_jvm()


def stop_jvm() -> None:
    """session.stop() leaves the py4j gateway's JVM running until this process exits. It
    exits when its stdin closes (PythonGatewayServer); a later getOrCreate() would start a
    new one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(params=["admin", "consumer"])
def offset_path(request: pytest.FixtureRequest, spark: object) -> Iterator[str]:
    """Runs the test once per driver-side offset reader of the connector."""
    deprecated = request.param == "consumer"
    spark.conf.set(OFFSET_FETCHING_CONF, "true" if deprecated else "false")  # type: ignore[attr-defined]
    try:
        yield request.param
    finally:
        spark.conf.set(OFFSET_FETCHING_CONF, "false")  # type: ignore[attr-defined]
