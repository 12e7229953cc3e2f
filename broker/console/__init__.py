"""`samsa console`: a web console of any Kafka-compatible cluster, over the Kafka protocol."""
