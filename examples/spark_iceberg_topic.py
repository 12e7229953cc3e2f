"""Read an Iceberg topic (samsa.iceberg.mode) with PySpark: the committed records of the topic
as an Iceberg table, through Spark's JDBC catalog over the broker's SQLite catalog.

    make run                          # in another terminal: Samsa on 127.0.0.1:9092, data in ./data
    kafka-topics --bootstrap-server 127.0.0.1:9092 --create --topic orders \\
        --config samsa.iceberg.mode=key_value
    ... produce (transactions or not), wait iceberg.catalog.commit.interval.ms ...
    .venv/bin/python examples/spark_iceberg_topic.py --data-dir data --topic orders

Jars: Iceberg's Spark runtime and the SQLite JDBC driver, from `make spark-deps`
(.cache/spark-<pyspark version>/jars, or --jars DIR). See docs/lakehouse.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# The broker registers its tables under this catalog name (a SQL catalog keeps the name in every
# row), in the namespace `samsa`: Spark must open the catalog under the same name.
CATALOG = "samsa"


def configure_catalog(spark: Any, data_dir: Path) -> None:
    """The broker's default catalog (iceberg.catalog.type=sql, iceberg.catalog.uri and
    iceberg.warehouse empty) as Spark's catalog `samsa`."""
    root = Path(data_dir).resolve() / "iceberg"
    prefix = f"spark.sql.catalog.{CATALOG}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "jdbc")
    spark.conf.set(f"{prefix}.uri", f"jdbc:sqlite:{root / 'catalog.db'}")
    spark.conf.set(f"{prefix}.warehouse", (root / "warehouse").as_uri())


def table_name(topic: str) -> str:
    return f"{CATALOG}.samsa.`{topic}`"


def report(spark: Any, topic: str) -> None:
    df = spark.table(table_name(topic))
    print(f"{df.count()} records in {table_name(topic)}")
    df.groupBy("partition").agg({"offset": "max", "*": "count"}).orderBy("partition").show()
    # each commit's snapshot summary: the offset each partition's next commit starts at
    snapshots = spark.table(f"{table_name(topic)}.snapshots")
    last = snapshots.orderBy("committed_at", ascending=False).first()
    if last is not None:
        covered = {k: v for k, v in last["summary"].items() if k.startswith("samsa.")}
        print(f"last commit {last['committed_at']}: {covered}")
    df.selectExpr("partition", "offset", "CAST(key AS STRING) AS key",
                  "CAST(value AS STRING) AS value", "timestamp").show(10, truncate=False)


def spark_session(jar_dir: Path | None, master: str = "local[2]") -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import pyspark
    from pyspark.sql import SparkSession

    jar_dir = jar_dir or REPO_ROOT / ".cache" / f"spark-{pyspark.__version__}" / "jars"
    jars = sorted(jar_dir.glob("*.jar"))
    if not any(j.name.startswith("iceberg-spark-runtime") for j in jars):
        raise SystemExit(f"Iceberg's Spark runtime missing in {jar_dir}: run `make spark-deps`")
    spark = (SparkSession.builder.master(master).appName("samsa-iceberg-topic")
             .config("spark.jars", ",".join(map(str, jars)))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="the broker's data dir")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--jars", type=Path, help="directory of the jars of `make spark-deps`")
    args = ap.parse_args(argv)
    spark = spark_session(args.jars)
    try:
        configure_catalog(spark, args.data_dir)
        report(spark, args.topic)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
