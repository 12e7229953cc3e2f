"""Samsa's own properties (no Kafka equivalent)."""

from __future__ import annotations

from samsa.config.schema.property_def import G_SAMSA, LOG_LEVELS, B, I, PropertyDef, S, prop
from samsa.config.schema.validators import LoggerLevels, ValidString, between

SAMSA: list[PropertyDef] = [
    prop("metrics.port", I, None, "Port of the Prometheus /metrics endpoint on the listener's "
         "host; unset disables it.", between(0, 65535), group=G_SAMSA),
    prop("samsa.fetch.sendfile.enable", B, False, "Send Fetch records from the segment files "
         "to the socket with sendfile (zero-copy, as Kafka does) on plaintext listeners "
         "(PLAINTEXT, SASL_PLAINTEXT); TLS listeners always read them into memory to encrypt "
         "them. Off by default: on loopback on the 2-core test machine it cost more broker CPU "
         "per GB than reading and writing (docs/performance.md).", group=G_SAMSA),
    prop("samsa.log.level", S, "INFO", "Level of Samsa's own log on stderr.",
         ValidString(LOG_LEVELS), group=G_SAMSA),
    prop("samsa.log.loggers", S, None, "Per-module levels overriding samsa.log.level, e.g. "
         "'samsa.coordinator.transaction=DEBUG,samsa.broker.handlers=DEBUG' "
         "(logger names are module paths).",
         LoggerLevels(LOG_LEVELS), group=G_SAMSA),
]
