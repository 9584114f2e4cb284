"""The local model the end-to-end eval runs: its set-up, its chat format, its server."""
