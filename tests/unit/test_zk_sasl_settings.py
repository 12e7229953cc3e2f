"""The broker's SASL login to ZooKeeper from its settings: the JAAS file (a property, or
KAFKA_OPTS's -Djava.security.auth.login.config), its login context, zookeeper.sasl.client, and
what is refused (Kerberos, a section with SASL turned off, a missing or malformed file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.broker.cluster.zk.client import ZkClientSettings, jvm_system_properties, sasl_login
from samsa.broker.security import jaas
from samsa.config.schema import BrokerConfig, ConfigError

DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def login(props: dict[str, Any], kafka_opts: str | None = None) -> Any:
    env = {} if kafka_opts is None else {"KAFKA_OPTS": kafka_opts}
    return sasl_login(BrokerConfig(props), env)


def test_jaas_file_syntax() -> None:
    contexts = jaas.parse(
        """/* brokers */
        KafkaServer {
          org.apache.kafka.common.security.plain.PlainLoginModule required
            user_admin="admin-secret";
        };
        // ZooKeeper
        Client{org.apache.zookeeper.server.auth.DigestLoginModule Required
            username='zk"user' password="p;a\\"ss{}" debug=true;
          other.Module optional;};
        """, "test.conf")
    assert list(contexts) == ["KafkaServer", "Client"]
    first, second = contexts["Client"]
    assert (first.name, first.flag, first.options) == (
        DIGEST, "required", {"username": 'zk"user', "password": 'p;a"ss{}', "debug": "true"})
    assert (second.name, second.flag, second.options) == ("other.Module", "optional", {})


@pytest.mark.parametrize("text, expect", [
    ("Client { m required a=b }", r"line 1: expected ;, found '}'"),
    ("Client {\n m maybe; };", "line 2: m has the control flag 'maybe'"),
    ("A { m required; };\nA { m required; };", "line 2: the login context 'A' is given twice"),
    ("Client { };", "the login context 'Client' has no login module"),
    ('Client { m required a="b; };', "cannot read"),
    ("Client { m required a=b;", "ends early"),
])
def test_malformed_jaas_file_is_named(text: str, expect: str) -> None:
    with pytest.raises(ConfigError, match=expect) as info:
        jaas.parse(text, "/etc/zk.conf")
    assert info.value.key == "java.security.auth.login.config"
    assert "/etc/zk.conf" in str(info.value)


def test_kafka_opts_system_properties() -> None:
    assert jvm_system_properties(
        "-Xmx1g -Djava.security.auth.login.config='/etc/a b/jaas.conf' -Dflag "
        "-Dzookeeper.sasl.clientconfig=ZkClient") == {
        "java.security.auth.login.config": "/etc/a b/jaas.conf", "flag": "",
        "zookeeper.sasl.clientconfig": "ZkClient"}
    with pytest.raises(ConfigError, match="KAFKA_OPTS"):
        jvm_system_properties("-Dx='unclosed")


def test_login_from_property_or_kafka_opts(tmp_path: Path) -> None:
    a = write(tmp_path / "a.conf", f'Client {{ {DIGEST} required username="a" password="pa"; }};')
    b = write(tmp_path / "b.conf", f'Zk {{ {DIGEST} required username="b" password="pb"; }};\n'
                                   f'Client {{ {DIGEST} required username="c" password="pc"; }};')
    prop = login({"java.security.auth.login.config": a})
    assert prop is not None
    assert prop.sasl_options() == {"mechanism": "DIGEST-MD5", "username": "a",
                                   "password": "pa"}
    assert (prop.context, prop.jaas_file) == ("Client", a)
    assert "pa" not in repr(prop)
    from_env = login({}, f"-Djava.security.auth.login.config={b} "
                         "-Dzookeeper.sasl.clientconfig=Zk")
    assert from_env is not None and from_env.username == "b"
    default_context = login({}, f"-Djava.security.auth.login.config={b}")
    assert default_context is not None and default_context.username == "c"
    # a property beats KAFKA_OPTS
    both = login({"java.security.auth.login.config": a, "zookeeper.sasl.clientconfig": "Client"},
                 f"-Djava.security.auth.login.config={b} -Dzookeeper.sasl.clientconfig=Zk")
    assert both is not None and both.username == "a"
    # Kafka's PlainLoginModule in the Client section: the ZooKeeper client does DIGEST-MD5
    plain = write(tmp_path / "plain.conf", "Client { org.apache.kafka.common.security.plain."
                                           'PlainLoginModule required username="p" '
                                           'password="pp"; };')
    got = login({"java.security.auth.login.config": plain})
    assert got is not None and got.sasl_options()["username"] == "p"


def test_no_login(tmp_path: Path) -> None:
    other = write(tmp_path / "k.conf", "KafkaServer { m required; };")
    assert login({}) is None
    assert login({}, "-Xmx1g") is None
    assert login({"java.security.auth.login.config": other}) is None
    assert login({"java.security.auth.login.config": other,
                  "zookeeper.sasl.clientconfig": "Missing"}) is None
    # without a login (nor mutual TLS) the secure ACLs would protect nothing
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true"):
        ZkClientSettings(BrokerConfig({"java.security.auth.login.config": other,
                                       "zookeeper.set.acl": True}), environ={})


def test_sasl_identity_allows_secure_acls(tmp_path: Path) -> None:
    a = write(tmp_path / "a.conf", f'Client {{ {DIGEST} required username="a" password="p"; }};')
    settings = ZkClientSettings(BrokerConfig({"zookeeper.set.acl": True}),
                                environ={"KAFKA_OPTS": f"-Djava.security.auth.login.config={a}"})
    assert settings.secure_acls and settings.sasl is not None and settings.context is None


def test_refused(tmp_path: Path) -> None:
    a = write(tmp_path / "a.conf", f'Client {{ {DIGEST} required username="a" password="p"; }};')
    # Kafka's JaasUtils refuses a Client section with zookeeper.sasl.client=false
    with pytest.raises(ConfigError, match="zookeeper.sasl.client is false"):
        login({"java.security.auth.login.config": a, "zookeeper.sasl.client": False})
    with pytest.raises(ConfigError, match="zookeeper.sasl.client is false"):
        login({}, f"-Djava.security.auth.login.config={a} -Dzookeeper.sasl.client=FALSE")
    assert login({"zookeeper.sasl.client": False}) is None
    kerberos = write(tmp_path / "krb.conf", "Client { com.sun.security.auth.module.Krb5LoginModule "
                                            'required useKeyTab=true keyTab="/k" '
                                            'principal="kafka/h@R"; };')
    with pytest.raises(ConfigError, match=r"GSSAPI, Kerberos\): not supported"):
        login({"java.security.auth.login.config": kerberos})
    no_password = write(tmp_path / "np.conf", f'Client {{ {DIGEST} required username="a"; }};')
    with pytest.raises(ConfigError, match="no login module with username and password"):
        login({"java.security.auth.login.config": no_password})
    with pytest.raises(ConfigError, match="java.security.auth.login.config.*cannot be read"):
        login({}, f"-Djava.security.auth.login.config={tmp_path / 'missing.conf'}")
