"""The built-in tools' one error, apart from SymPy: the proxy side imports it too."""

from __future__ import annotations


class ToolInputError(ValueError):
    """The arguments are wrong or too costly; the message says which and why."""
