"""The built-in tool pack: the course assistant's math and simulation tools.

Offline, on SymPy and NumPy, each call in a sandboxed process (``sandbox``).
``catalog`` turns the pack into catalog ``Tool`` records and in-process tools
(``builtin``: the ``builtin:`` scheme and :class:`~proxy.tools.builtin.PythonTools`).
The executor imports this package; nothing here imports the executor.
"""
