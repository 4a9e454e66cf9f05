"""Files on disk: naming, the commit journal and lock, memory-mapped shards, the ``.db`` index."""
