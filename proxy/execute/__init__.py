"""The executor: run a tool plan's calls in parallel, safely, and shrink what they return.

``plan`` (the DAG the planner hands over) → ``scheduler`` (a ready-queue under
limits) → ``invocation`` (HTTP and in-process tools behind one interface, under the
``egress`` policy) → ``compress`` (field selection, then a size cap).
"""
