"""A node: the N broker processes of one host under one supervisor (`samsa serve --processes N`,
docs/design/cores.md)."""
