"""End to end with a real model: see :mod:`eval.e2e.__main__`."""
