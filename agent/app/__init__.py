"""The composition root: what the ACP methods do, wired from the packages below.

- `server`: the table of every ACP method Heron answers, and the live sessions;
- `sessions`: session/load, resume, list, close and delete (the store's methods);
- `options`: session/set_config_option and session/set_mode;
- `prompt`: a prompt arrives: a slash command runs its handler, any other text is a turn;
- `warmup`: what the first prompt needs, imported in the background once a session exists.

Nothing below imports this package; `agent.cli` and `agent.terminal` sit above it.
"""
