"""What a permission question says: each "always" option names one scope in a label short
enough for an editor's button, and the question lists every key when the label cannot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.permissions.labels import SHORT, covered, options_for, unseen_note
from agent.permissions.policy import PATH_SEP
from agent.tools.command_keys import command_keys


def always(keys: list[str]) -> str:
    (name,) = [o.name for o in options_for(keys) if o.kind == "allow_always"]
    (reject,) = [o.name for o in options_for(keys) if o.kind == "reject_always"]
    assert reject == name.replace("Always allow", "Always reject")
    return name


@pytest.mark.parametrize(
    ("command", "label", "listed"),
    [
        # one key: the label says it all
        ("git status -s", "Always allow `git status` (safe options, paths in the workspace)", None),
        ("make test", "Always allow exactly `make test`", None),
        # one long exact command: the label refers to it, the question lists it
        (
            "python3 -m pytest tests/test_permissions_labels.py -x -q -k labels",
            "Always allow exactly this command",
            [
                "- exactly `python3 -m pytest tests/test_permissions_labels.py -x -q -k labels`",
            ],
        ),
        # several programs with the same scope: named, one scope
        (
            "git status && ls -la",
            "Always allow `git status`, `ls` (safe options, paths in the workspace)",
            [
                "- `git status` (safe options, paths in the workspace)",
                "- `ls` (safe options, paths in the workspace)",
            ],
        ),
        # several exact commands
        (
            "make && make install",
            "Always allow exactly these 2 commands",
            ["- exactly `make`", "- exactly `make install`"],
        ),
        # the case of issue 25: an exact command and a program, never in one breath
        (
            "python3 -m pytest tests/ -x 2>&1 | tail -20",
            "Always allow these 2 commands (each as listed)",
            [
                "- exactly `python3 -m pytest tests/ -x`",
                "- `tail` (safe options, paths in the workspace)",
            ],
        ),
        # many programs: counted, not named
        (
            "git status; git diff; git log; ls; cat x; head y; wc z",
            "Always allow these 7 programs (safe options, paths in the workspace)",
            None,
        ),
    ],
)
def test_each_always_label_names_one_scope(command, label, listed) -> None:
    keys = command_keys(command)
    assert always(keys) == label
    assert len(label) <= len("Always allow ") + SHORT + 40
    note = covered(keys)
    if listed is None and len(keys) == 1:
        assert note is None  # the label says it all
    elif listed is not None:
        assert note == '"Always" covers each of these:\n' + "\n".join(listed)
    else:
        assert note is not None and note.count("\n- ") == len(keys)


def test_a_multi_line_or_backticked_exact_command_is_listed_as_it_is() -> None:
    keys = command_keys("ls\nprintf 'a`b`c\\n'")
    note = covered(keys)
    assert note is not None and "- exactly `` printf 'a`b`c\\n' ``" in note
    (key,) = command_keys("printf 'line one\nline two'")
    assert covered([key]) is not None  # several lines: never squeezed into a label
    assert always([key]) == "Always allow exactly this command"
    assert "  ```\n  printf 'line one\n  line two'\n  ```" in (covered([key]) or "")


def test_paths_a_key_is_limited_to_are_named() -> None:
    assert always([f"edit_file{PATH_SEP}/w/.git/config"]) == (
        "Always allow `edit_file` on exactly `/w/.git/config`"
    )
    two = [f"move_path{PATH_SEP}/a", f"move_path{PATH_SEP}/b"]
    assert always(two) == "Always allow `move_path` on these 2 paths"
    assert covered(two) == (
        '"Always" covers each of these:\n'
        "- `move_path` on exactly `/a`\n"
        "- `move_path` on exactly `/b`"
    )
    outside = [f"bash:ls{PATH_SEP}/out", f"bash-exact:rm x{PATH_SEP}/out"]
    assert always(outside) == "Always allow these 2 commands (each as listed) on exactly `/out`"


def test_a_call_that_can_never_be_remembered_offers_only_once() -> None:
    assert [o.kind for o in options_for([])] == ["allow_once", "reject_once"]
    assert covered([]) is None


def test_the_unseen_changes_show_small_files_and_removals(tmp_path: Path) -> None:
    config = tmp_path / ".git" / "config"
    config.parent.mkdir()
    config.write_text("[core]\n\tfsmonitor = touch pwned\n")
    fifo = tmp_path / ".git" / "hooks"
    fifo.mkdir()
    pipe = fifo / "pre-commit"
    os.mkfifo(pipe)  # a FIFO is listed, never opened (it would block)
    big = tmp_path / ".heron" / "big"
    big.parent.mkdir()
    big.write_text("x" * 10_000)
    gone = tmp_path / ".git" / "hooks" / "post-checkout"
    note = unseen_note([str(config), str(pipe), str(big), str(gone)])
    assert f"- `{config}`\n  ```\n  [core]\n  \tfsmonitor = touch pwned\n  ```" in note
    assert f"- `{pipe}`\n" in note and f"- `{big}`\n" in note
    assert note.endswith(f"- `{gone}` (removed)")
    assert "x" * 100 not in note


def test_many_changed_paths_are_counted_not_all_named(tmp_path: Path) -> None:
    paths = [str(tmp_path / ".heron" / f"f{i}") for i in range(500)]
    note = unseen_note(paths)
    assert note.count("\n- ") == 21 and note.endswith("- and 480 more")
