"""What the model reads, and how much of its context window that fills.

- `prompt`: the system prompt (AGENTS.md included) and the user's prompt as OpenAI content;
- `usage`: the window's size and the tokens used (`usage_update`);
- `compaction`: the older history replaced by a summary when it outgrows the window.
"""
