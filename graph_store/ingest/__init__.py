"""Adapters from outside formats to :class:`~graph_store.models.Tool`, and the import.

Each adapter is a small module with one ``parse_*`` function that turns a file into
tools plus one :class:`~graph_store.errors.InvalidItem` per item it could not read;
:mod:`graph_store.ingest.catalog` picks the adapter, enforces unique names and stores
the batch.
"""
