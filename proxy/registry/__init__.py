"""The tool registry API: add, replace, list and delete catalog tools over HTTP."""
