"""The database pack: read-only navigation and functional tools over a SQL database.

The tools of "Middleware for LLMs" (../shared/METHOD.md §3) over any database a
setting names (``packs.database``): navigation (tables and columns, which columns hold
a value, a column's distinct values, whether a value is in a column, how a date
column is written) and functional (is a WHERE clause valid and how many rows match;
run one SELECT under a row cap and a timeout). Nothing writes: ``guard`` refuses
anything but one SELECT before it reaches the database, and ``engine`` connects
read-only besides (SQLite ``mode=ro`` with an authorizer, PostgreSQL read-only
transactions). ``catalog`` turns each database into catalog ``Tool`` records and
in-process tools, the way :mod:`proxy.tools.packs.math.catalog` does for the math pack.
"""
