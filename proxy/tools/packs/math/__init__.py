"""The math pack: the course assistant's math and simulation tools, on SymPy and NumPy.

``pack`` names the tools and is what the sandbox runs; ``catalog`` turns the pack into
catalog ``Tool`` records and in-process tools that call the sandbox.
"""
