"""Writing datasets: FileWriter, shard pages, the .db index, atomic commit and append."""
