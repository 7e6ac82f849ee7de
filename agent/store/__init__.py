"""Sessions that last: a SQLite store of conversations and the session methods that use it.

`store` runs SQLite in its own thread, `db` holds the schema and queries, `saver` writes a
session step by step and restores it, `replay` turns a stored transcript into what
`session/load` sends, `methods` answers session/load, resume, list, close and delete,
`failures` says why a write failed in words a user can act on.
Importing this package does not import sqlite3: that waits for the first use.
"""
