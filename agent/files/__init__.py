"""The file-access layer under the tools: the local disk with care for links, owner, mode and
encodings (disk), the editor-or-disk backend (backend), what the model has seen (seen),
walking and naming paths (paths) and whether a path is inside the workspace (workspace).
Imports nothing of the tools above it."""
