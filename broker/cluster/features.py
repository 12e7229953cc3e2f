"""Feature flags (Kafka's KIP-584): the levels this broker supports and the cluster's finalized
levels, which ApiVersions v3+ reports and UpdateFeatures changes.

Samsa lists four features, which every broker supports without any switch.
`transaction.version`: its levels mean what they mean in Kafka
4.x: 0 the classic transaction protocol, 1 the flexible transaction-log value, 2 transactions
v2 (KIP-890 part 2: Produce v12, EndTxn v5, TxnOffsetCommit v5; clients switch to it at a
finalized 2). Samsa implements all three (the transaction coordinator writes
TransactionLogValue v1 while the finalized level is >= 1, and for every TV2 transaction), so it
supports 0..2, and a new cluster finalizes 2 as Kafka 4.x does; an existing cluster keeps what
it finalized.
`group.version` (KIP-848): level 1 enables the consumer group protocol
(ConsumerGroupHeartbeat, ConsumerGroupDescribe: ApiVersions lists them only while it is
finalized at 1, `API_GATES`); a new cluster finalizes 1 as Kafka 4.x does.
`share.version` (KIP-932) gates the share groups' APIs (ShareGroupHeartbeat/Describe,
ShareFetch/ShareAcknowledge, the share coordinator's persister APIs and the share-group offsets
APIs: ApiVersions lists them only while it is finalized at 1). Share groups are production-ready
since Kafka 4.2, so as in Kafka 4.3 every broker supports 0..1 and a new cluster finalizes 1
(there is no other switch: Kafka 4.3 has no `group.share.enable`); `kafka-features downgrade
--feature share.version=0` turns the share groups' APIs off and `upgrade` back on.
`streams.version` (KIP-1071) gates the streams groups' APIs (StreamsGroupHeartbeat/Describe,
StreamsGroupTopologyDescriptionUpdate). As in Kafka 4.4 (StreamsVersion.SV_1 is its latest
production level) every broker supports 0..1 and a new cluster finalizes 1; `kafka-features
downgrade --feature streams.version=0` turns their APIs off. `UNSTABLE` (the levels of
`unstable.feature.versions.enable`) and `UNSTABLE_APIS` (APIs listed only with
`unstable.api.versions.enable`) are where a feature or an API still in development goes.
`metadata.version` (KRaft) is not listed: Samsa does not implement it.

Where the finalized levels live: the metadata store (samsa-metadata.json for one broker,
ZooKeeper's /feature znode for a cluster, as Kafka's ZooKeeper mode kept them). A level of 0
is "not finalized" and is not stored or reported, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from samsa.config.schema import BrokerConfig, ConfigError
from samsa.protocol.errors import ErrorCode, KafkaError

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"

# name -> (min, max) level this broker implements.
SUPPORTED: dict[str, tuple[int, int]] = {
    TRANSACTION_VERSION: (0, 2), GROUP_VERSION: (0, 1), SHARE_VERSION: (0, 1),
    STREAMS_VERSION: (0, 1),
}

# Levels of features still in development: supported only with
# unstable.feature.versions.enable (none today).
UNSTABLE: dict[str, tuple[int, int]] = {}


def supported(unstable: bool) -> dict[str, tuple[int, int]]:
    """The levels this broker supports; `unstable`: its unstable.feature.versions.enable."""
    return {**SUPPORTED, **UNSTABLE} if unstable else SUPPORTED


# What a new cluster finalizes (as Kafka 4.4's `kafka-storage format` does).
DEFAULT_FINALIZED: dict[str, int] = {TRANSACTION_VERSION: 2, GROUP_VERSION: 1, SHARE_VERSION: 1,
                                     STREAMS_VERSION: 1}

# api key -> (feature, level): the API is advertised only while the feature is finalized at
# that level or above (Kafka's GroupVersion gates the consumer group protocol's APIs).
API_GATES: dict[int, tuple[str, int]] = {
    68: (GROUP_VERSION, 1), 69: (GROUP_VERSION, 1),
    76: (SHARE_VERSION, 1), 77: (SHARE_VERSION, 1), 78: (SHARE_VERSION, 1), 79: (SHARE_VERSION, 1),
    83: (SHARE_VERSION, 1), 84: (SHARE_VERSION, 1), 85: (SHARE_VERSION, 1), 86: (SHARE_VERSION, 1),
    87: (SHARE_VERSION, 1), 90: (SHARE_VERSION, 1), 91: (SHARE_VERSION, 1), 92: (SHARE_VERSION, 1),
    88: (STREAMS_VERSION, 1), 89: (STREAMS_VERSION, 1), 93: (STREAMS_VERSION, 1),
}

# APIs still in development: listed by ApiVersions only with unstable.api.versions.enable (as
# Kafka lists its unstable ones), and then only as API_GATES allows (none today).
UNSTABLE_APIS: frozenset[int] = frozenset()

# api key -> its first version still in development (Kafka's latestVersionUnstable): listed only
# with unstable.api.versions.enable. InitProducerId v6 is KIP-939's two-phase commit.
UNSTABLE_VERSIONS: dict[int, int] = {22: 6}


def api_enabled(api_key: int, finalized: FinalizedFeatures) -> bool:
    gate = API_GATES.get(api_key)
    return gate is None or finalized.level(gate[0]) >= gate[1]


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The cluster's finalized levels (only levels > 0) and their epoch (-1: unknown)."""

    epoch: int = -1
    levels: dict[str, int] = field(default_factory=dict)

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)


def default_levels(initial: dict[str, int] | None = None) -> dict[str, int]:
    """What a new cluster finalizes: Kafka 4.x's levels, `initial` (initial.feature.levels)
    overriding them."""
    levels = {**DEFAULT_FINALIZED, **(initial or {})}
    return {name: level for name, level in levels.items() if level > 0}


def parse_initial_levels(entries: list[str], unstable: bool) -> dict[str, int]:
    """initial.feature.levels (name=level, ...) checked against the levels this broker
    supports; raises ValueError naming the bad entry."""
    levels: dict[str, int] = {}
    known = supported(unstable)
    for entry in entries:
        name, sep, value = entry.partition("=")
        name = name.strip()
        try:
            level = int(value)
        except ValueError:
            level = -1
        if not sep or level < 0:
            raise ValueError(f"{entry!r} is not name=level")
        if name not in known:
            raise ValueError(f"unknown feature {name!r} (known: {', '.join(sorted(known))})")
        lo, hi = known[name]
        if level != 0 and not lo <= level <= hi:
            raise ValueError(f"{name} supports levels {lo} to {hi}, not {level}")
        levels[name] = level
    return levels


def initial_levels(config: BrokerConfig) -> dict[str, int]:
    """The broker's initial.feature.levels, checked; raises ConfigError."""
    entries = config["initial.feature.levels"]
    try:
        return parse_initial_levels(entries, config["unstable.feature.versions.enable"])
    except ValueError as exc:
        raise ConfigError.invalid("initial.feature.levels", ",".join(entries),
                                  str(exc)) from None


class UpgradeType(IntEnum):
    """FeatureUpdateKey.UpgradeType (UpdateFeatures v1+; v0's AllowDowngrade maps to 1 or 2)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class InvalidUpdateVersion(KafkaError):
    error_code = ErrorCode.invalid_update_version


def apply_updates(
    broker_id: int, current: dict[str, int], updates: list[tuple[str, int, int]],
    supported_levels: dict[str, tuple[int, int]] = SUPPORTED,
) -> dict[str, int]:
    """The finalized levels after (feature, level, upgrade type) updates, checked as Kafka's
    controller checks them (FeatureControlManager.updateFeature); the first bad update raises
    InvalidUpdateVersion and nothing changes."""
    levels = dict(current)
    for name, level, upgrade_type in updates:
        def invalid(reason: str, name: str = name, level: int = level) -> InvalidUpdateVersion:
            return InvalidUpdateVersion(
                f"Invalid update version {level} for feature {name}. {reason}")

        if upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE,
                                UpgradeType.UNSAFE_DOWNGRADE):
            raise invalid("The controller does not support the given upgrade type.")
        if level < 0:
            raise invalid("A feature version cannot be less than 0.")
        levels_here = supported_levels.get(name)
        if levels_here is None:
            raise invalid(f"Local controller {broker_id} does not support this feature.")
        low, high = levels_here
        if not low <= level <= high:
            raise invalid(f"Local controller {broker_id} only supports versions {low}-{high}")
        now = current.get(name, 0)
        if level < now and upgrade_type == UpgradeType.UPGRADE:
            raise invalid("Can't downgrade the version of this feature without setting the "
                          "upgrade type to either safe or unsafe downgrade.")
        if level > now and upgrade_type != UpgradeType.UPGRADE:
            raise invalid("Can't downgrade to a newer version.")
        if level > 0:
            levels[name] = level
        else:
            levels.pop(name, None)
    return levels
