"""The console: a web UI at ``/ui`` over the proxy's own JSON API (README.md here)."""
