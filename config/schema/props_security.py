"""Security properties: SASL, TLS, password encoding and the authorizer."""

from __future__ import annotations

from samsa.config.password_encoder import CIPHERS, DEFAULT_CIPHER, KEY_FACTORIES
from samsa.config.schema.property_def import G_SECURITY, LS, PW, B, I, L, PropertyDef, S, prop
from samsa.config.schema.validators import ValidList, ValidString, at_least

SECURITY: list[PropertyDef] = [
    prop("ssl.endpoint.identification.algorithm", S, "https", "How a broker checks another's "
         "certificate when it connects to it over TLS: https (the certificate must name the "
         "host) or empty (any certificate the trust store accepts).",
         ValidString(("https", "")), group=G_SECURITY),
    prop("connection.failed.authentication.delay.ms", I, 100, "Delay before the connection of a "
         "failed authentication is closed.", at_least(0), group=G_SECURITY),
    prop("sasl.server.max.receive.size", I, 524288, "Largest request read from a client before "
         "its SASL authentication completes; a bigger one closes the connection.", at_least(1),
         group=G_SECURITY),
    prop("sasl.enabled.mechanisms", LS, ["PLAIN"], "SASL mechanisms offered on SASL listeners: "
         "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.", kafka=["GSSAPI"], group=G_SECURITY),
    prop("connections.max.reauth.ms", L, 0, "When positive, the most a SASL session may last "
         "before the client must re-authenticate on its connection (KIP-368; clients are told "
         "the lifetime, capped by the credential's own expiry); a connection whose session "
         "expired is closed at its next request. May be prefixed with the listener and the "
         "mechanism in lower case: listener.name.<listener>.<mechanism>."
         "connections.max.reauth.ms.", at_least(0), group=G_SECURITY),
    prop("sasl.server.callback.handler.class", S, None, "OAUTHBEARER token validation: a Python "
         "callable named package.module:callable, called with the token and the listener's "
         "JAAS options, returning the principal and expiry (see the security documentation); "
         "unset: Kafka's unsecured JWT validator. Usually set per listener as "
         "listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class.",
         group=G_SECURITY),
    prop("ssl.keystore.type", S, "PEM", "Format of the key store: PEM (a file holding the "
         "private key and the certificate chain, or ssl.keystore.key and "
         "ssl.keystore.certificate.chain inline) or PKCS12; JKS is not read.",
         ValidString(("PEM", "PKCS12")), kafka="JKS", group=G_SECURITY),
    prop("ssl.keystore.location", S, None, "Key store file.", group=G_SECURITY),
    prop("ssl.keystore.password", PW, None, "Password of the key store file (PKCS12), or of an "
         "encrypted PEM key when ssl.key.password is unset.", group=G_SECURITY),
    prop("ssl.key.password", PW, None, "Password of the private key.", group=G_SECURITY),
    prop("ssl.keystore.key", PW, None, "PEM private key (with ssl.keystore.type=PEM).",
         group=G_SECURITY),
    prop("ssl.keystore.certificate.chain", S, None, "PEM certificate chain (with "
         "ssl.keystore.type=PEM).", group=G_SECURITY),
    prop("ssl.truststore.type", S, "PEM", "Format of the trust store: PEM or PKCS12.",
         ValidString(("PEM", "PKCS12")), kafka="JKS", group=G_SECURITY),
    prop("ssl.truststore.location", S, None, "Trust store file (PEM certificates) used to verify "
         "client certificates.", group=G_SECURITY),
    prop("ssl.truststore.password", PW, None, "Password of a PKCS12 trust store.",
         group=G_SECURITY),
    prop("ssl.truststore.certificates", S, None, "PEM trusted certificates inline.",
         group=G_SECURITY),
    prop("ssl.client.auth", S, "none", "Client certificates: none, requested or required.",
         ValidString(("none", "requested", "required")), group=G_SECURITY),
    prop("ssl.enabled.protocols", LS, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.",
         ValidList(("TLSv1.2", "TLSv1.3")), group=G_SECURITY),
    prop("ssl.protocol", S, "TLSv1.3", "Newest TLS version offered.",
         ValidString(("TLSv1.2", "TLSv1.3", "TLS")), group=G_SECURITY),
    prop("ssl.cipher.suites", LS, [], "TLS 1.2 cipher suites (OpenSSL names); empty: the "
         "defaults.", group=G_SECURITY),
    prop("ssl.allow.dn.changes", B, False, "Whether a key store changed while the broker runs "
         "(listener.name.<listener>.ssl.keystore.*) may have a different subject "
         "distinguished name than the current one.", group=G_SECURITY),
    prop("ssl.allow.san.changes", B, False, "Whether a key store changed while the broker runs "
         "may drop subject alternative names of the current one.", group=G_SECURITY),
    prop("password.encoder.secret", PW, None, "The secret that encrypts the dynamic password "
         "configs (listener.name.<listener>.ssl.keystore.password...) stored in ZooKeeper; "
         "without it they cannot be set. (The single broker keeps them in its metadata file "
         "unencrypted, as Kafka's KRaft brokers keep them in the metadata log.)",
         group=G_SECURITY),
    prop("password.encoder.old.secret", PW, None, "The secret the dynamic password configs were "
         "encrypted with before password.encoder.secret: at start-up the broker decodes its "
         "stored passwords with it and writes them back to ZooKeeper encrypted with "
         "password.encoder.secret.", group=G_SECURITY),
    prop("password.encoder.keyfactory.algorithm", S, None, "The key derivation of the password "
         "encoder; unset: PBKDF2WithHmacSHA512.", ValidString(KEY_FACTORIES), group=G_SECURITY),
    prop("password.encoder.cipher.algorithm", S, DEFAULT_CIPHER, "The cipher that encrypts the "
         "dynamic password configs (a password keeps the cipher it was stored with).",
         ValidString(CIPHERS), group=G_SECURITY),
    prop("password.encoder.key.length", I, 128, "The password encoder's key length in bits.",
         at_least(8), group=G_SECURITY),
    prop("password.encoder.iterations", I, 4096, "The password encoder's key derivation "
         "iterations.", at_least(1024), group=G_SECURITY),
    prop("ssl.principal.mapping.rules", S, "DEFAULT", "How a client certificate's distinguished "
         "name becomes a principal: DEFAULT keeps the whole name.", ValidString(("DEFAULT",)),
         group=G_SECURITY),
    prop("authorizer.class.name", S, "", "The authorizer of requests: empty (every principal "
         "may do everything) or Kafka's built-in ACL authorizer, named "
         "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
         "kafka.security.authorizer.AclAuthorizer; Samsa has no other.", group=G_SECURITY),
    prop("super.users", S, None, "Principals the authorizer allows everything, whatever the "
         "ACLs: a semicolon separated list such as User:admin;User:CN=broker.", group=G_SECURITY),
    prop("allow.everyone.if.no.acl.found", B, False, "With an authorizer: allow an action on a "
         "resource that no ACL names (false: deny it).", group=G_SECURITY),
]
