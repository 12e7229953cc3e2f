"""Listener security: TLS contexts and principals (tls.py), SASL authentication (sasl.py,
scram.py); JAAS login configuration files (jaas.py, the ZooKeeper client's login)."""
