"""What the tests and the benchmarks start beside toolgraph, kept out of the installed
package: the fake upstream LLM (a real HTTP server the tests script), its scripted
responder, and launchers for the ArcadeDB and PostgreSQL servers and for a proxy in a
thread. Importable from a checkout (the repository root is on ``sys.path`` under
pytest and with ``python -m``), never from the wheel."""
