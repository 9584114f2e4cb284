"""What goes to the upstream as it came: the embeddings, completions and moderations
routes, and the upstream's own model list."""
