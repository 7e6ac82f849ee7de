"""Agent Skills: folders with a `SKILL.md` (YAML front matter with `name` and `description`,
then instructions; optional scripts and files beside it), the open format other agents read.

- `discovery`: where skills are read from (the user's `~/.agents/skills/`, `~/.claude/skills/`;
  the project's `.agents/skills/`, `.claude/skills/` when it is trusted), and which are skipped
  and why;
- `catalog`: the bounded list the system prompt gives the model (name and description only);
- `content`: a skill's instructions, its files, one of its files (confined to its folder);
- `tool`: the `skill` tool the model loads a skill with.

Each skill is also a slash command (`agent.commands`).
"""
