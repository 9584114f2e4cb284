"""The knowledge-graph pack: read-only navigation of an RDF graph or a Neo4j graph.

The knowledge-base tools of "Middleware for LLMs" (../shared/METHOD.md §3) over any
graph a setting names (``packs.knowledge_graph``): ``find_entities`` starts from a
name; ``get_relations``, ``get_neighbors``, ``get_attributes``, ``argmax``,
``argmin``, ``intersection`` and ``count`` work on *variables*, the entity sets
earlier calls of the same request made (:mod:`proxy.tools.variables`). Backends
(``backend``): RDF through SPARQL (``rdf``; ``sparql``: an embedded Oxigraph store or
an endpoint by URL) and Bolt (``bolt``). ``catalog`` turns each graph into catalog
``Tool`` records and in-process tools.
"""
