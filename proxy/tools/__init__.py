"""Tools that run inside toolgraph: the packs, the sandbox some of them run in, and
what they share with the executor.

``packs``: the math pack (SymPy and NumPy, each call in the sandbox), the database pack
and the knowledge-graph pack, each turned into catalog ``Tool`` records and in-process
tools. ``sandbox``: the fork server and the process that talks to it. Beside them,
``builtin`` (the ``builtin:`` scheme and :class:`~proxy.tools.builtin.PythonTools`),
``variables`` (a request's entity sets) and ``errors`` (a tool's input error). The
executor imports this package; nothing here imports the executor.
"""
