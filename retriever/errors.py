"""The retriever's errors.

RetrieverError
 ├── ModelNotFound     the configured model folder does not exist or is not a model
 │    └── ModelExportFailed  the ONNX export of the model cannot be written or loaded
 ├── IndexNotBuilt     a search over a catalog that has no index yet
 ├── VectorStoreError  Qdrant failed a call (unreachable, or a collection that no longer works)
 ├── FoldersTaken      every local Qdrant folder is held by another process
 └── InvalidTools      a client's tools that cannot be ranked (duplicates, bad schemas)
"""

from __future__ import annotations


class RetrieverError(Exception):
    """Base of the retriever's errors; ``str()`` is a message for a person."""


class ModelNotFound(RetrieverError):
    pass


class ModelExportFailed(ModelNotFound):
    pass


class IndexNotBuilt(RetrieverError):
    pass


class VectorStoreError(RetrieverError):
    pass


class FoldersTaken(RetrieverError):
    pass


class InvalidTools(RetrieverError):
    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param
