"""Trust, skills and rules pieces on their own: the front matter subset, the remembered
decisions file, what git is told in an untrusted repository, and the inventory."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.frontmatter import parse_front_matter
from agent.trust import folders
from agent.trust.git import DISABLED, config_env, guard_env, harmless_value, program_settings
from agent.trust.inventory import inert, summary

# -- front matter ---------------------------------------------------------------------------


def test_front_matter_block_scalars_continuations_and_nested_maps():
    parsed = parse_front_matter(
        "---\n"
        "name: pdf\n"
        "description: >\n"
        "  Fill PDF forms\n"
        "  and merge them.\n"
        "\n"
        "  Use when: a form comes.\n"
        "usage: |-\n"
        "  line one\n"
        "    indented\n"
        "plain: a value\n"
        "  continued here\n"
        "quoted: 'it''s\n"
        "  two lines'\n"
        "metadata:\n"
        "  author: me\n"
        "  tags:\n"
        "    - a\n"
        "allowed-tools: Read Grep\n"
        "---\n"
        "Body.\n"
    )
    assert parsed.found and not parsed.problems
    assert parsed.values == {
        "name": "pdf",
        "description": "Fill PDF forms and merge them.\nUse when: a form comes.\n",
        "usage": "line one\n  indented",
        "plain": "a value continued here",
        "quoted": "it's two lines",
        "allowed-tools": "Read Grep",
    }
    assert parsed.body == "Body.\n"


def test_front_matter_problems_are_named_not_guessed():
    parsed = parse_front_matter("---\nname: x\nnot a pair\n  orphan: line\n---\n")
    assert parsed.values == {"name": "x"}
    assert [p.split(":")[0] for p in parsed.problems] == ["line 3", "line 4"]
    assert parse_front_matter('---\nname: "unclosed\n---\n').problems
    assert not parse_front_matter("no fence\n---\n").found


# -- remembered decisions ---------------------------------------------------------------------


@pytest.fixture
def config_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folders._cache.clear()
    return tmp_path


def test_the_nearest_decision_wins_and_symlinks_lead(config_home):
    src = config_home / "src"
    (src / "app" / "vendor").mkdir(parents=True)
    link = config_home / "link"
    link.symlink_to(src / "app")
    assert folders.remembered(src / "app") is None
    folders.remember(src, True)
    folders.remember(src / "app" / "vendor", False)
    assert folders.remembered(src / "app") == folders.Remembered(True, str(src))
    assert folders.remembered(link / "vendor") == folders.Remembered(
        False, str(src / "app" / "vendor")
    )
    text = folders.trust_file().read_text()
    assert text.startswith("# Folders Heron trusts")
    assert oct(folders.trust_file().stat().st_mode & 0o777) == "0o600"
    folders.remember(src / "app" / "vendor", True)  # a decision replaces the folder's own
    assert folders.remembered(src / "app" / "vendor").trusted


def _remember_many(args: tuple[str, str, int]) -> None:
    config, base, worker = args
    os.environ["XDG_CONFIG_HOME"] = config
    folders._cache.clear()
    for n in range(10):
        folders.remember(Path(base, f"w{worker}-{n}"), n % 2 == 0)


def test_two_processes_deciding_at_once_keep_both(config_home):
    config = str(config_home / "config")
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        pool.map(_remember_many, [(config, str(config_home), w) for w in range(2)])
    for worker in range(2):
        for n in range(10):
            decided = folders.remembered(config_home / f"w{worker}-{n}")
            assert decided is not None and decided.trusted is (n % 2 == 0)


def test_a_broken_file_is_never_written_over(config_home):
    path = folders.trust_file()
    path.parent.mkdir(parents=True)
    path.write_text("trusted = 3\n")
    assert folders.remembered(config_home) is None
    with pytest.raises(folders.ConfigError, match="must be a list"):
        folders.remember(config_home, True)
    assert path.read_text() == "trusted = 3\n"


# -- git in an untrusted repository ---------------------------------------------------------


def test_which_settings_name_programs():
    assert harmless_value("core.fsmonitor") == ""
    assert harmless_value("core.sshcommand") == "ssh"
    assert harmless_value("filter.lfs.process") == ""
    assert harmless_value("diff.evil.textconv") == "cat"
    assert harmless_value("diff.external") == DISABLED
    assert harmless_value("gpg.ssh.program") == "ssh-keygen"
    assert harmless_value("alias.st", "!rm -rf ~") == ""
    assert harmless_value("submodule.lib.update", "!make") == "checkout"
    assert harmless_value("submodule.lib.update", "rebase") is None
    assert harmless_value("pager.log", "false") is None
    assert harmless_value("pager.log", "evil") == "cat"
    assert harmless_value("user.name", "Me") is None
    assert harmless_value("diff.color") is None  # not a driver's program
    assert harmless_value("credential.https://example.com.helper") == ""


def test_the_users_own_values_come_back_and_lists_are_emptied_first():
    entries = [
        ("global", "core.sshcommand", "ssh -i ~/.ssh/work"),
        ("global", "credential.helper", "store"),
        ("global", "user.name", "Me"),
        ("local", "core.sshcommand", "evil"),
        ("local", "credential.helper", "!evil"),
        ("local", "filter.x.clean", "evil"),
        ("local", "user.name", "Other"),
        ("command", "core.editor", "vim"),
    ]
    pairs = program_settings(entries)
    assert pairs[:3] == [
        ("core.hookspath", "/dev/null"),
        ("core.fsmonitor", ""),
        ("protocol.ext.allow", "never"),
    ]
    assert ("core.sshcommand", "ssh -i ~/.ssh/work") in pairs
    index = pairs.index(("credential.helper", ""))
    assert pairs[index + 1] == ("credential.helper", "store")
    assert ("filter.x.clean", "") in pairs
    assert not any(key in ("user.name", "core.editor") for key, _ in pairs)


def test_the_environment_comes_after_what_it_holds():
    env = config_env(
        [("core.hookspath", "/dev/null")],
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "c"},
    )
    assert env == {
        "GIT_CONFIG_KEY_0": "a.b",
        "GIT_CONFIG_VALUE_0": "c",
        "GIT_CONFIG_KEY_1": "core.hookspath",
        "GIT_CONFIG_VALUE_1": "/dev/null",
        "GIT_CONFIG_COUNT": "2",
    }
    assert config_env([], {"GIT_CONFIG_COUNT": "x"})["GIT_CONFIG_COUNT"] == "0"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_runs_nothing_the_repository_names(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "ran"
    program = tmp_path / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    program.chmod(0o755)
    base = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@e",
    }

    def git(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=repo, env=env or base, capture_output=True, text=True
        )

    git("init", "-q")
    Path(repo, "a.txt").write_text("a\n")
    Path(repo, ".gitattributes").write_text("*.txt filter=x diff=x\n")
    for key in ("core.fsmonitor", "filter.x.clean", "filter.x.smudge", "diff.x.textconv"):
        git("config", key, str(program))
    git("config", "alias.st", f"!{program}")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\necho hook >> {marker}\n")
    hook.chmod(0o755)

    guarded = {**base, **guard_env(repo, base)}
    for args in (("status",), ("add", "."), ("commit", "-qm", "x"), ("log", "-p"), ("st",)):
        git(*args, env=guarded)
    assert not marker.exists()
    assert "a.txt" in git("log", "--stat", env=guarded).stdout  # git itself worked
    git("status", env=base)
    assert marker.exists()  # without the guard, the repository's program runs


# -- what stays inert -----------------------------------------------------------------------


def test_the_inventory_of_an_untrusted_folder(tmp_path):
    (tmp_path / ".heron" / "commands").mkdir(parents=True)
    (tmp_path / ".heron" / "commands" / "a.md").write_text("A")
    skill = tmp_path / ".claude" / "skills" / "s"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text(
        '[core]\n\tfsmonitor = x\n[filter "lfs"]\n\tprocess = y\n\trequired = true\n'
    )
    hook = tmp_path / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    (tmp_path / ".git" / "hooks" / "pre-commit.sample").write_text("x")
    found = inert(tmp_path, tmp_path)
    assert found == [
        ".heron/commands/a.md",
        ".claude/skills/s/SKILL.md",
        ".git/config: core.fsmonitor",
        ".git/config: filter.lfs.process",
        ".git/hooks/post-checkout",
    ]
    assert summary(found) == (
        "1 command file, 1 skill, git settings that run programs (core.fsmonitor, "
        "filter.lfs.process) and git hooks (post-checkout)"
    )
