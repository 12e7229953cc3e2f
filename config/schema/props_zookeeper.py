"""ZooKeeper properties (Kafka's ZkConfigs)."""

from __future__ import annotations

from samsa.config.schema.property_def import G_ZK, LS, PW, B, I, PropertyDef, S, prop
from samsa.config.schema.validators import ValidList, ValidString

ZOOKEEPER: list[PropertyDef] = [
    prop("zookeeper.connect", S, None, "ZooKeeper connect string; unset means a single broker "
         "with in-process metadata.", group=G_ZK),
    prop("zookeeper.session.timeout.ms", I, 18000, "ZooKeeper session timeout.", group=G_ZK),
    prop("zookeeper.connection.timeout.ms", I, None, "ZooKeeper connect timeout; unset uses the "
         "session timeout.", group=G_ZK),
    prop("zookeeper.set.acl", B, False, "Create znodes with secure ACLs: all rights for the "
         "creating identity (sasl:<username> with ZooKeeper SASL, the client certificate's "
         "distinguished name over mutual TLS), read for everyone else except under "
         "/config/users and /config/brokers; needs ZooKeeper SASL (a JAAS Client section) or "
         "zookeeper.ssl.client.enable and a client key store.", group=G_ZK),
    prop("java.security.auth.login.config", S, None, "JAAS file whose zookeeper.sasl.clientconfig "
         "section (Client) is the broker's login to ZooKeeper: "
         "org.apache.zookeeper.server.auth.DigestLoginModule required username=\"...\" "
         "password=\"...\"; (SASL DIGEST-MD5). A JVM system property in Kafka: unset, Samsa "
         "reads -Djava.security.auth.login.config=... from the KAFKA_OPTS environment variable.",
         group=G_ZK),
    prop("zookeeper.sasl.client", B, True, "Authenticate to ZooKeeper with SASL when the JAAS "
         "file has the zookeeper.sasl.clientconfig section; false while it has one is refused, "
         "as Kafka does. A JVM system property in Kafka: unset, -Dzookeeper.sasl.client of "
         "KAFKA_OPTS.", group=G_ZK),
    prop("zookeeper.sasl.clientconfig", S, "Client", "The JAAS login context (section) with the "
         "broker's ZooKeeper login. A JVM system property in Kafka: unset, "
         "-Dzookeeper.sasl.clientconfig of KAFKA_OPTS.", group=G_ZK),
    prop("zookeeper.ssl.client.enable", B, False, "Connect to ZooKeeper over TLS (its "
         "secureClientPort).", group=G_ZK),
    prop("zookeeper.clientCnxnSocket", S, None, "ZooKeeper's Java client socket "
         "(org.apache.zookeeper.ClientCnxnSocketNetty for TLS).", group=G_ZK,
         ignored="Samsa's ZooKeeper client speaks TLS without it"),
    prop("zookeeper.ssl.keystore.location", S, None, "Key store presented to ZooKeeper (mutual "
         "TLS): PEM (the private key and certificate chain in one file) or PKCS12.",
         group=G_ZK),
    prop("zookeeper.ssl.keystore.password", PW, None, "Password of the key store (PKCS12) or "
         "of the encrypted PEM key.", group=G_ZK),
    prop("zookeeper.ssl.keystore.type", S, None, "PEM or PKCS12; unset: from the file's "
         "extension (.p12 and .pfx are PKCS12, others PEM), as ZooKeeper does; JKS is not read.",
         ValidString(("PEM", "PKCS12")), group=G_ZK),
    prop("zookeeper.ssl.truststore.location", S, None, "Trust store that verifies ZooKeeper's "
         "certificate: PEM certificates or PKCS12; unset: the system's default CAs.",
         group=G_ZK),
    prop("zookeeper.ssl.truststore.password", PW, None, "Password of a PKCS12 trust store.",
         group=G_ZK),
    prop("zookeeper.ssl.truststore.type", S, None, "PEM or PKCS12; unset: from the file's "
         "extension.", ValidString(("PEM", "PKCS12")), group=G_ZK),
    prop("zookeeper.ssl.protocol", S, "TLSv1.2", "Newest TLS version offered to ZooKeeper "
         "(TLSv1.2, or TLSv1.3 where both sides have it).",
         ValidString(("TLSv1.2", "TLSv1.3", "TLS")), group=G_ZK),
    prop("zookeeper.ssl.enabled.protocols", LS, None, "TLS versions allowed; unset: up to "
         "zookeeper.ssl.protocol.", ValidList(("TLSv1.2", "TLSv1.3")), group=G_ZK),
    prop("zookeeper.ssl.cipher.suites", LS, None, "TLS 1.2 cipher suites (OpenSSL names); "
         "unset: the defaults.", group=G_ZK),
    prop("zookeeper.ssl.endpoint.identification.algorithm", S, "HTTPS", "HTTPS: ZooKeeper's "
         "certificate must name the host of zookeeper.connect; empty: any certificate the "
         "trust store accepts.", group=G_ZK),
    prop("zookeeper.ssl.crl.enable", B, False, "Certificate revocation lists.", group=G_ZK,
         ignored="revocation is not checked; a revoked certificate must leave the trust store"),
    prop("zookeeper.ssl.ocsp.enable", B, False, "Online certificate status checks.",
         group=G_ZK, ignored="revocation is not checked"),
]
