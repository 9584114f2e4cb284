"""toolgraph's service: the OpenAI-compatible HTTP API and everything behind it."""

import os

# litellm fetches its model cost map over the network at import unless told not to,
# and retries in a background thread when that fails. This must run before any
# import of litellm, so it lives at the top of the package that imports it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
