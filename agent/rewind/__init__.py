"""Going back to an earlier message: the conversation (the model's history and the transcript
`session/load` replays) and the files, under /undo's rule.

- `marks`: where each step left the history, noted in the transcript; a message's place.
"""
