"""The Tool→Tool edges: from call paths, from schemas (by rule, then optionally by an
LLM), and from TaskBench graphs."""
