"""The processes commands start, and how Heron ends.

- `tree`: every process a command started, found again and stopped (subreaper, markers);
- `shutdown`: signals, crashes and the end of stdin stop those processes, then Heron exits.

Empty of imports: `shutdown` is installed before the editor's `initialize` is answered.
"""
