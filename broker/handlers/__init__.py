"""One module per API family; `register_all` is the dispatch table."""
