"""Listener security: TLS contexts and principals (tls.py), SASL authentication (sasl.py,
scram.py)."""
