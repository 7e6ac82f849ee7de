"""Command files: the front matter subset, the prompt a command file makes, and which prompts
are commands."""

from __future__ import annotations

from pathlib import Path

from agent.acp.protocol import ResourceLinkIn, TextBlockIn
from agent.commands.catalog import CommandSet
from agent.commands.files import CommandFolder, parse_command
from agent.commands.parse import parse
from agent.frontmatter import split_front_matter


def test_front_matter_values_plain_quoted_and_commented():
    meta, body = split_front_matter(
        "\ufeff---\r\n"
        "description: Plain value # a comment\r\n"
        'hint: "a \\"quoted\\" hint"\r\n'
        "Other: 'it''s'\r\n"
        "# a comment line\r\n"
        "not a pair\r\n"
        "---\r\n"
        "The body.\r\n"
    )
    assert meta == {"description": "Plain value", "hint": 'a "quoted" hint', "other": "it's"}
    assert body.strip() == "The body."


def test_no_front_matter_or_an_unclosed_one_is_all_body():
    assert split_front_matter("Just a prompt\n---\n") == ({}, "Just a prompt\n---\n")
    text = "---\ndescription: x\nbody without a closing fence\n"
    assert split_front_matter(text) == ({}, text)


def test_a_command_file_description_hint_and_arguments():
    command = parse_command(
        "fix", "---\nargument-hint: issue\n---\n# Fix it\nFix $ARGUMENTS.", "user", "p"
    )
    assert (command.description, command.hint) == ("Fix it", "issue")
    assert command.prompt("#12") == "# Fix it\nFix #12."
    plain = parse_command("plain", "Do the thing.", "user", "p")
    assert plain.hint is None
    assert plain.prompt("") == "Do the thing."
    assert plain.prompt("now") == "Do the thing.\n\nnow"
    assert parse_command("empty", "", "user", "p").description == "/empty"


def test_a_folder_is_read_again_only_when_a_file_changes(tmp_path: Path, monkeypatch):
    (tmp_path / "a.md").write_text("First.\n")
    folder = CommandFolder(tmp_path, "project", confine=tmp_path)
    reads: list[str] = []
    original = CommandFolder._load

    def counting(self, name, path, info):
        reads.append(name)
        return original(self, name, path, info)

    monkeypatch.setattr(CommandFolder, "_load", counting)
    assert folder.scan()["a"].body == "First."
    assert folder.scan()["a"].body == "First."
    assert reads == ["a"]
    (tmp_path / "a.md").write_text("Second, longer.\n")
    assert folder.scan()["a"].body == "Second, longer."
    assert reads == ["a", "a"]


def test_which_prompts_are_commands(tmp_path: Path):
    commands = CommandSet(tmp_path)

    def name(*blocks):
        call = parse(list(blocks), commands)
        return None if call is None else (call.command.name, call.arguments)

    def t(text):
        return TextBlockIn(type="text", text=text)

    assert name(t("/help")) == ("help", "")
    assert name(t("/compact  the API \n")) == ("compact", "the API")
    assert name(t("/mode\nfull-access")) == ("mode", "full-access")
    assert name(t("/init "), t("more"), t(" text")) == ("init", "more text")
    for text in (" /help", "/helpx", "/help/", "help", "/", "/Help", "x /help"):
        assert name(t(text)) is None, text
    link = ResourceLinkIn(type="resource_link", uri="file:///a", name="a")
    assert name(link, t("/help")) is None
    call = parse([t("/init"), link], commands)
    assert call is not None and call.attachments == [link]


def test_a_stuck_scan_keeps_the_last_list_and_is_not_piled_up(tmp_path: Path, monkeypatch):
    import threading
    import time

    import anyio

    from agent.commands import catalog

    (tmp_path / ".heron" / "commands").mkdir(parents=True)
    (tmp_path / ".heron" / "commands" / "one.md").write_text("One.\n")
    commands = CommandSet(tmp_path)
    release = threading.Event()
    scans: list[str] = []
    original = CommandFolder.scan

    def stuck(self):
        scans.append(self.source)
        if len(scans) > 2:  # the second refresh's scan hangs (a dead network mount)
            release.wait(60)
        return original(self)

    monkeypatch.setattr(CommandFolder, "scan", stuck)
    monkeypatch.setattr(catalog, "SCAN_TIMEOUT", 1.0)

    async def main() -> list[float]:
        await commands.refresh()
        assert [f.name for f in commands.files] == ["one"]
        took = []
        for _ in range(2):
            started = time.monotonic()
            await commands.refresh()
            took.append(time.monotonic() - started)
            assert [f.name for f in commands.files] == ["one"]  # the last list
        return took

    try:
        first, second = anyio.run(main)
    finally:
        release.set()
    # The first waits out the scan's timeout (not the 60 s hang); the second does not wait
    # for the scan still stuck at all.
    assert 0.9 < first < 30 and second < first
    assert len(scans) == 3  # no second thread piled on the stuck one


def test_mcp_prompt_arguments_from_the_typed_text():
    from agent.commands.command import PromptRef
    from agent.commands.mcp import prompt_arguments

    one = PromptRef("s", "p", (("topic", True),))
    assert prompt_arguments(one, "the whole  text") == ({"topic": "the whole  text"}, [])
    assert prompt_arguments(one, "") == ({}, ["topic"])
    several = PromptRef("s", "p", (("code", True), ("lang", False), ("focus", False)))
    assert prompt_arguments(several, '"x = 1" py bugs and style') == (
        {"code": "x = 1", "lang": "py", "focus": "bugs and style"},
        [],
    )
    assert prompt_arguments(several, "'unclosed py") == ({"code": "'unclosed", "lang": "py"}, [])
    assert prompt_arguments(several, "") == ({}, ["code"])
    assert prompt_arguments(PromptRef("s", "p"), "ignored") == ({}, [])
