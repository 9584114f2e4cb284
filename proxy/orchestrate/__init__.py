"""Orchestrate mode: plan over the catalog, run the tools, stream the answer."""
