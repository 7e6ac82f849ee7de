"""What the model reads, and how much of its context window that fills.

- `rules`: the user's and the project's rules files (AGENTS.md and the other agents' names);
- `prompt`: the system prompt (rules, skills) and the user's prompt as OpenAI content;
- `instructions`: a session's system prompt, built once (prefix stability);
- `usage`: the window's size and the tokens used (`usage_update`);
- `compaction`: the older history replaced by a summary when it outgrows the window.
"""
