"""The tool catalog and the tool dependency graph (see DESIGN.md §2)."""
