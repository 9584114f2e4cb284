"""The tool catalog orchestrate mode plans over, and ``/mcp`` and the console search.

Three halves, so that the event loop and the worker thread never share a half-written
state:

* :mod:`~proxy.catalog.service`, on the loop: when to load (start-up, a change, the
  store's version moved), readiness, closing;
* :mod:`~proxy.catalog.loader`, in a worker thread: reads the store, syncs Qdrant,
  builds the index, and returns one immutable :class:`~proxy.catalog.loaded.LoadedCatalog`
  that the service installs in a single assignment;
* :mod:`~proxy.catalog.snapshot`: the index snapshot a restart is served from before
  that sync.

:mod:`~proxy.catalog.assembly` makes a catalog of its parts (planner, no-tool gate),
:mod:`~proxy.catalog.packs` writes the packs' tools into the store, and
:mod:`~proxy.catalog.command` makes the catalog ready for the shell's commands.
"""
