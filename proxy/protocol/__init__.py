"""The OpenAI wire: typed models of what clients send and what they get back.

One module per API, as vLLM's ``protocol.py`` ended up split: :mod:`.chat` for chat
completions today, a ``responses`` module beside it for the Responses API later (its
own models and a translation to and from chat's, the modes unchanged). What the
APIs share is in :mod:`.base` (the two base models, the error object, pydantic
locations in OpenAI's spelling) and :mod:`.body`.

A request's body (read within its size limit, decoded within its depth and length
limits) is part of the wire, not of a mode: every API and the admin routes read
theirs through :mod:`.body`, so it lives here, in the core layer, where the
chat and registry routers both reach it without one reaching into the other.
"""
