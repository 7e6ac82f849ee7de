"""Installing like the peers: the wheel builds from a clean copy and runs from a fresh venv
(`heron` and `heron-agent`), every package Heron imports is declared, the ACP registry entry
follows the registry's rules, and the `heron setup` login is offered to a client that signals
terminal login either way."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from acp_client import DEFAULT_CAPABILITIES
from conftest import _heron_executable

import agent

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ENTRY = ROOT / "registry" / "heron"


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_package_heron_imports_is_declared():
    imported: set[str] = set()
    for path in (ROOT / "agent").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                # A stdlib-only script run bare (the sandbox's zygote) imports its sibling
                # module by its own name: that is Heron's code, not a dependency.
                names = {alias.name.split(".")[0] for alias in node.names}
                imported |= {n for n in names if not (path.parent / f"{n}.py").is_file()}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"agent", "__future__"}
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    for module in sorted(third_party):
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dists, f"{module} is imported by agent/ but installed by no distribution"
        assert dists & declared, (
            f"agent/ imports {module} ({dists}) but pyproject does not declare it"
        )


def test_the_package_has_a_script_named_like_it():
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts["heron"] == scripts[PYPROJECT["project"]["name"]] == "agent.cli:main"


def test_the_registry_entry_follows_the_registry_rules():
    entry = json.loads((ENTRY / "agent.json").read_text())
    assert entry["id"] == ENTRY.name and re.fullmatch(r"[a-z][a-z0-9-]*", entry["id"])
    assert {"id", "name", "version", "description", "distribution"} <= set(entry)
    version = PYPROJECT["project"]["version"]
    assert entry["version"] == version == agent.__version__
    assert entry["distribution"] == {
        "uvx": {"package": f"{PYPROJECT['project']['name']}=={version}"}
    }
    icon = (ENTRY / "icon.svg").read_text()
    assert re.search(r'width="16"', icon) and re.search(r'height="16"', icon)
    assert 'viewBox="0 0 16 16"' in icon
    colours = re.findall(r'(?:fill|stroke)="([^"]*)"', icon)
    assert colours and set(colours) <= {"currentColor", "none", "inherit"}


TERMINAL_META = {**DEFAULT_CAPABILITIES, "_meta": {"terminal-auth": True}}
TERMINAL_AUTH = {**DEFAULT_CAPABILITIES, "auth": {"terminal": True}}


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("caps", [TERMINAL_META, TERMINAL_AUTH], ids=["_meta", "auth.terminal"])
def test_setup_login_is_offered_in_both_forms(heron, caps, fast_path, tmp_path):
    config = tmp_path / "elsewhere.toml"
    client = heron("--config", str(config), initialize=False)
    if not fast_path:
        client.notify("_heron/nothing", {})  # the full server answers initialize, not the fast path
    [method] = client.initialize(caps)["authMethods"]
    assert method["type"] == "terminal" and method["args"] == ["setup"]
    legacy = method["_meta"]["terminal-auth"]
    assert legacy["label"] and legacy["args"][-1] == "setup"
    assert legacy["args"][:2] == ["--config", str(config)]  # the flags Heron was started with
    # The command line is this very Heron's setup (which wants a terminal: without one it
    # says so, which shows that it was setup that ran).
    assert legacy["command"] == _heron_executable()
    ran = subprocess.run(
        [legacy["command"], *legacy["args"]],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2 and "heron setup: needs a terminal" in ran.stderr


def test_no_login_is_offered_without_either_signal(heron):
    assert heron().request("initialize", {"protocolVersion": 1})["authMethods"] == []


@pytest.mark.slow
def test_the_wheel_builds_from_a_clean_copy_and_runs_from_a_fresh_venv(tmp_path):
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    if not listed:
        pytest.skip("not a git checkout")
    source = tmp_path / "source"
    for name in listed.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    dist = tmp_path / "dist"
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        check=True,
        timeout=600,
    )
    [wheel] = dist.glob("heron_agent-*.whl")
    print(f"wheel: {wheel.name}, {wheel.stat().st_size / 1024:.0f} KB")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "-q", str(wheel)], check=True, timeout=900
    )
    version = subprocess.run(
        [env_dir / "bin" / "heron", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"heron {agent.__version__}"
    helped = subprocess.run(
        [env_dir / "bin" / "heron-agent", "--help"], capture_output=True, text=True, check=True
    )
    assert "usage: heron" in helped.stdout
    # The installed agent answers initialize (nothing it needs was left out of the wheel).
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    )
    answered = subprocess.run(
        [env_dir / "bin" / "heron-agent"],
        input=line + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert json.loads(answered.stdout.splitlines()[0])["result"]["protocolVersion"] == 1
