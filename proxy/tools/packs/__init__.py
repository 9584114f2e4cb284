"""The built-in tool packs: ``math`` (offline, always on), ``database`` and
``knowledge_graph`` (one set of tools per configured database or graph; what those two
share is in ``configured``)."""
