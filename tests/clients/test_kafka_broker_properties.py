"""Kafka's broker properties over a real socket: librdkafka's admin test (0081-admin) sets
sasl.kerberos.min.time.before.relogin on a broker with AlterConfigs and
IncrementalAlterConfigs; Kafka accepts it (per broker), so Samsa does, without effect."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

KEY = "sasl.kerberos.min.time.before.relogin"


def _value(admin: AdminClient, resource: ConfigResource) -> tuple[str | None, int]:
    entry = admin.describe_configs([resource])[resource].result(30)[KEY]
    return entry.value, entry.source


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_librdkafka_sets_a_kerberos_property_on_a_broker(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id),
                              set_config={KEY: "58000"})
    admin.alter_configs([resource])[resource].result(30)
    assert _value(admin, resource) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    incremental = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id),
                                 incremental_configs=[ConfigEntry(
                                     KEY, "59000",
                                     incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([incremental])[incremental].result(30)
    assert _value(admin, incremental) == ("59000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
