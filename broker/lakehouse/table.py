"""An Iceberg topic's table, written with pyiceberg. Everything here blocks (catalog, files):
it runs in a worker thread, never on the event loop.

Each commit's snapshot summary holds `samsa.next-offset.<partition>` for every partition the
table covers (carried over from the snapshot before it): the offset the partition's next commit
starts at. An Iceberg commit is atomic (the catalog swaps the table's metadata pointer, or
refuses when it moved), so after a crash, even in the middle of a commit, the table's current
snapshot says exactly which records it holds."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from samsa.protocol.records import Record

from . import values

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

NAMESPACE = "samsa"
# A SQL catalog keeps its name in each row (catalog_name): readers must open it under this name
# (pyiceberg's SqlCatalog("samsa", ...), Spark's spark.sql.catalog.samsa)
CATALOG_NAME = "samsa"
OFFSET_KEY = "samsa.next-offset."


class StaleOffsets(Exception):
    """The table moved since its offsets were read (another writer committed): read again."""


def open_catalog(kind: str, uri: str, warehouse: str) -> Catalog:
    if kind == "rest":
        from pyiceberg.catalog.rest import RestCatalog
        return RestCatalog(CATALOG_NAME, uri=uri, warehouse=warehouse)
    from pyiceberg.catalog.sql import SqlCatalog
    return SqlCatalog(CATALOG_NAME, uri=uri, warehouse=warehouse)


def arrow_schema() -> pa.Schema:
    import pyarrow as pa
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.schema([
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(header)),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
    ])


def to_arrow(rows: Iterable[tuple[int, Record]]) -> pa.Table:
    """(partition, record) pairs as the table's columns (key_value mode)."""
    import pyarrow as pa
    cols: dict[str, list[Any]] = {n: [] for n in arrow_schema().names}
    for partition, r in rows:
        cols["key"].append(r.key)
        cols["value"].append(r.value)
        cols["headers"].append([{"key": k, "value": v} for k, v in r.headers])
        cols["partition"].append(partition)
        cols["offset"].append(r.offset)
        cols["timestamp"].append(r.timestamp * 1000)
    return pa.Table.from_pydict(cols, schema=arrow_schema())


class TopicTable:
    """The table `samsa.<topic>` in the catalog."""

    def __init__(self, catalog: Catalog, topic: str, target_file_size: int) -> None:
        self.catalog = catalog
        self.identifier = (NAMESPACE, topic)
        self.target_file_size = target_file_size
        self._table: Table | None = None

    def load(self) -> Table | None:
        """The table as it is now; None before its first commit."""
        from pyiceberg.exceptions import NoSuchTableError
        if self._table is None:
            try:
                self._table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                return None
        else:
            self._table.refresh()
        return self._table

    def _create(self, schema: pa.Schema) -> Table:
        from pyiceberg.exceptions import TableAlreadyExistsError
        self.catalog.create_namespace_if_not_exists(NAMESPACE)
        try:
            self._table = self.catalog.create_table(self.identifier, schema=schema, properties={
                "write.target-file-size-bytes": str(self.target_file_size)})
        except TableAlreadyExistsError:  # another broker's partition leader made it first
            self._table = self.catalog.load_table(self.identifier)
        return self._table

    def offsets(self) -> tuple[int | None, dict[int, int]]:
        """(current snapshot id, partition -> next offset) of the table as it is now."""
        table = self.load()
        snapshot = None if table is None else table.current_snapshot()
        if snapshot is None or snapshot.summary is None:
            return None, {}
        found = {int(k[len(OFFSET_KEY):]): int(v)
                 for k, v in snapshot.summary.additional_properties.items()
                 if k.startswith(OFFSET_KEY)}
        return snapshot.snapshot_id, found

    def commit(self, rows: list[tuple[int, Record]], next_offsets: Mapping[int, int],
               expected_snapshot: int | None, value_schemas: dict[int, str] | None) -> None:
        """Append the rows as one snapshot whose summary records the partitions' new next
        offsets; StaleOffsets if the table moved past `expected_snapshot` since it was read.
        `value_schemas` (value_schema_id_prefix mode): the Avro schema of each id the values
        carry; the table gains the columns they add before the append."""
        snapshot, offsets = self.offsets()
        if snapshot != expected_snapshot:
            raise StaleOffsets(f"{self.identifier}: snapshot {snapshot}, not {expected_snapshot}")
        offsets.update(next_offsets)
        props = {f"{OFFSET_KEY}{p}": str(o) for p, o in sorted(offsets.items())}
        if value_schemas is None:
            df = to_arrow(rows)
            table = self._table or self._create(df.schema)
        else:
            table = self._evolve([values.arrow_schema(value_schemas[i])
                                  for i in sorted(value_schemas)])
            import pyarrow as pa
            df = pa.Table.from_pylist(values.decode(rows, value_schemas),
                                      schema=table.schema().as_arrow())
        from pyiceberg.exceptions import CommitFailedException
        try:  # the append's commit asserts the branch is still at `snapshot`
            table.append(df, snapshot_properties=props)
        except CommitFailedException as exc:
            raise StaleOffsets(f"{self.identifier}: {exc}") from exc

    def _evolve(self, schemas: list[pa.Schema]) -> Table:
        """The table with every column of `schemas` (a schema change in the registry adds a
        field: a new optional column)."""
        table = self._table or self._create(schemas[0])
        for schema in schemas:
            if set(schema.names) - set(table.schema().column_names):
                with table.update_schema() as update:
                    update.union_by_name(schema)
        return table
