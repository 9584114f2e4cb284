"""Embedding retrieval over tools (see DESIGN.md §2)."""
