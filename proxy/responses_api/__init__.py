"""The Responses API (``/v1/responses``): relayed to an upstream that speaks it, else
translated into chat completions and served by the modes."""
