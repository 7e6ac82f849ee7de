"""The file-access layer under the tools: the local disk with care for links, owner, mode and
encodings (disk), the editor-or-disk backend (backend), what the model has seen (seen), and
walking and naming paths inside the workspace (paths). Imports nothing of the tools above it."""
