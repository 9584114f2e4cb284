"""Routes relayed to the upstream as they came: embeddings, completions, moderations."""
