"""Sessions that last: a SQLite store of conversations.

`store` runs SQLite in its own thread, `db` holds the schema and queries, `saver` writes a
session step by step, `replay` turns a stored transcript into what `session/load` sends,
`failures` says why a write failed in words a user can act on. The methods that use it
(session/load, resume, list, close and delete) are `agent.app.sessions`.
Importing this package does not import sqlite3: that waits for the first use.
"""
