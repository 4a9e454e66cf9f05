"""Orders of row ids: shuffles, sharding, samplers (pure functions of counts, seed, epoch)."""
