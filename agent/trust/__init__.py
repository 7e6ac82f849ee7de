"""Workspace trust: a folder is untrusted until the user says otherwise, and what a project
can add that changes what Heron runs or asks stays inert until then.

- `folders`: the user's remembered decisions, per folder by real path, in the user's config;
- `state`: one session's trust (plain data: the session saves its own answer);
- `inventory`: what an untrusted folder holds that stays inert (command files, skills, git
  settings that run programs, git hooks);
- `git`: the environment that keeps a repository's hooks and program settings from running
  in the commands Heron runs while the folder is not trusted.

Asking (the first prompt's question, `/trust`) is `agent.commands.trust`; what trust gates is
read where it is used (`agent.commands` for command files, `agent.skills`, the system prompt in
`agent.context`, the commands' environment in `agent.session`).
"""
