"""The metadata the broker processes of one host share without ZooKeeper (store.py)."""

# Its file in a node's data dir, where `samsa serve --processes N` puts it (broker/node/).
NODE_FILE = "samsa-metadata.db"
