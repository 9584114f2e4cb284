"""Select mode: the client's own tools, ranked and trimmed before the upstream sees them."""
