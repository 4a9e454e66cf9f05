"""Reading datasets: shards (mmap), vectorized row gathers, .db lookups, orders and samplers."""
