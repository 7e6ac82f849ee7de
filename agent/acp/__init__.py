"""The Agent Client Protocol side of Heron: the wire (NDJSON JSON-RPC), the message models, the
`initialize` answer and the server that maps ACP methods onto sessions."""
