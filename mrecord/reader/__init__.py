"""Reading mrecord datasets: shards, row lookups, orders (shuffles, sharding, samplers)."""
