"""`samsa topic|group|txn|acl|user|config|reassign|elect-leaders|produce|consume|cluster ...`:
admin commands that speak the Kafka protocol to any
Kafka-compatible broker (Samsa or Apache Kafka). The top layer of the CLI: it uses only
protocol/'s codecs and config/, never the broker's internals."""
