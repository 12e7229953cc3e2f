"""Server properties (Kafka's ServerConfigs and the like)."""

from __future__ import annotations

from samsa.config.schema.property_def import (
    COMPRESSION_TYPES,
    G_SERVER,
    GZIP_LEVEL,
    LS,
    LZ4_LEVEL,
    NO_RECOMPRESSION,
    ZSTD_LEVEL,
    B,
    I,
    L,
    PropertyDef,
    S,
    prop,
)
from samsa.config.schema.validators import ValidString, at_least

SERVER: list[PropertyDef] = [
    prop("node.id", I, 0, "This broker's id (Samsa runs one broker; broker.id is a synonym).",
         kafka=-1, group=G_SERVER),
    prop("broker.id", I, 0, "Legacy name of node.id; when only one of the two is set the other "
         "follows it.", kafka=-1, group=G_SERVER),
    prop("message.max.bytes", I, 1048588, "Largest record batch size the broker accepts "
         "(after compression).", at_least(0), topic="max.message.bytes", group=G_SERVER),
    prop("auto.create.topics.enable", B, True, "Create a topic when a client asks for metadata "
         "of, or produces to, a topic that does not exist.", group=G_SERVER),
    prop("unstable.feature.versions.enable", B, False, "Support the levels of features still "
         "in development, so UpdateFeatures may finalize them (none today: share.version 1 is "
         "production-ready, as in Kafka 4.2+); for testing only.", group=G_SERVER),
    prop("initial.feature.levels", LS, [], "Feature levels a new cluster finalizes, as "
         "name=level (what kafka-storage format --feature gives a KRaft cluster), e.g. "
         "'transaction.version=1,group.version=0'; a feature not named gets Kafka 4.3's level "
         "for a new cluster (transaction.version 2, group.version 1, share.version 1). Read "
         "once, when the cluster's metadata is created; later, kafka-features changes the "
         "levels.",
         group=G_SERVER),
    prop("delete.topic.enable", B, True, "Allow DeleteTopics; when false it is refused.",
         group=G_SERVER),
    prop("compression.type", S, "producer", "Final compression of a topic's data; 'producer' "
         "keeps what the producer sent.", ValidString(COMPRESSION_TYPES),
         topic="compression.type", group=G_SERVER,
         refused="batches are stored as the producer compressed them"),
    prop("compression.gzip.level", I, -1, "gzip level when compression.type is gzip.",
         GZIP_LEVEL, topic="compression.gzip.level", group=G_SERVER, ignored=NO_RECOMPRESSION),
    prop("compression.lz4.level", I, 9, "lz4 level when compression.type is lz4.", LZ4_LEVEL,
         topic="compression.lz4.level", group=G_SERVER, ignored=NO_RECOMPRESSION),
    prop("compression.zstd.level", I, 3, "zstd level when compression.type is zstd.", ZSTD_LEVEL,
         topic="compression.zstd.level", group=G_SERVER, ignored=NO_RECOMPRESSION),
    prop("num.io.threads", I, 8, "Threads handling requests.", at_least(1), group=G_SERVER,
         ignored="requests are handled on one event loop"),
    prop("num.network.threads", I, 3, "Threads reading and writing sockets.", at_least(1),
         group=G_SERVER, ignored="sockets are served by the same event loop"),
    prop("background.threads", I, 10, "Threads for background tasks.", at_least(1),
         group=G_SERVER, ignored="background tasks run on the event loop"),
    prop("fetch.max.bytes", I, 57671680, "Most bytes returned for one fetch request (a fetch "
         "asking for more gets this much; the first batch is returned whatever its size).",
         at_least(1024), group=G_SERVER),
    prop("max.request.partition.size.limit", I, 2000, "Most partitions one "
         "DescribeTopicPartitions response describes (the client asks for the rest).",
         at_least(1), group=G_SERVER),
    prop("max.incremental.fetch.session.cache.slots", I, 1000, "Most incremental fetch sessions "
         "kept.", at_least(0), group=G_SERVER,
         ignored="there are no incremental fetch sessions, every fetch is a full one"),
    prop("controlled.shutdown.enable", B, True, "Before shutting down, ask the controller "
         "(ControlledShutdown) to move the leadership of this broker's partitions to other "
         "in-sync replicas and take it out of their ISRs (a single broker just flushes and "
         "closes).", group=G_SERVER),
    prop("controlled.shutdown.max.retries", I, 3, "Attempts of a controlled shutdown (the "
         "controller unreachable, or partitions still led here) before the broker shuts down "
         "anyway, leaving the rest to the controller once its registration is gone.",
         at_least(1), group=G_SERVER),
    prop("controlled.shutdown.retry.backoff.ms", L, 5000, "Wait between attempts of a "
         "controlled shutdown.", at_least(0), group=G_SERVER),
    prop("broker.rack", S, None, "Rack of this broker, reported in metadata.", group=G_SERVER),
]
