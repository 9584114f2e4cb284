"""graph_store's errors, one tree::

GraphStoreError
├── ToolNotFound          a name or id that the catalog does not hold
├── StoreUnavailable      the backend cannot be reached or read (Neo4j down, a corrupt file)
└── InvalidItem           one input item cannot become a Tool or an edge; names the
                          file, the item and the problem, so that a batch reports it
                          and goes on with the rest
"""

from __future__ import annotations


class GraphStoreError(Exception):
    """The root of every error graph_store raises on purpose."""


class ToolNotFound(GraphStoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"no tool named or with id {key!r}")
        self.key = key


class StoreUnavailable(GraphStoreError):
    """The backend cannot be used; the message says which and why."""


class JudgeUnavailable(GraphStoreError):
    """The model that confirms dependency edges could not be asked; says why."""


class InvalidItem(GraphStoreError):
    def __init__(self, file: str, item: str, problem: str) -> None:
        super().__init__(f"{file}: {item}: {problem}")
        self.file = file
        self.item = item
        self.problem = problem
