"""The OpenAI wire: typed models of what clients send and what they get back.

One module per API, as vLLM's ``protocol.py`` ended up split: :mod:`.chat` for chat
completions, :mod:`.responses` for the Responses API (its translation into chat
completions and back, used by that API alone, is :mod:`proxy.responses_api.translation`:
the modes speak chat only). What the
APIs share is in :mod:`.base` (the two base models, the error object, pydantic
locations in OpenAI's spelling) and :mod:`.body`.

A request's body (read within its size limit, decoded within its depth and length
limits) is part of the wire, not of a mode: every API and the admin routes read
theirs through :mod:`.body`, so it lives here, in the core layer, where the
chat and registry routers both reach it without one reaching into the other.
"""
