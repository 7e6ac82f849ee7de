"""Installing like the peers, publishing ready: the sdist and the wheel build from a clean copy,
pass `twine check`, carry the LICENSE and run from a fresh venv (`heron` and `heron-agent`);
the version comes from one place (CHANGELOG.md and the registry entry name it); every package
Heron imports is declared; the ACP registry entry follows the registry's rules; and the
`heron setup` login is offered to a client that signals terminal login either way."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
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


# What the registry's agent.schema.json allows at the top of an entry.
REGISTRY_KEYS = {
    "id", "name", "version", "description", "repository", "website", "authors", "license",
    "license_url", "icon", "distribution",
}  # fmt: skip


def test_the_registry_entry_follows_the_registry_rules():
    entry = json.loads((ENTRY / "agent.json").read_text())
    assert entry["id"] == ENTRY.name and re.fullmatch(r"[a-z][a-z0-9-]*", entry["id"])
    assert {"id", "name", "version", "description", "distribution"} <= set(entry) <= REGISTRY_KEYS
    version = agent.__version__
    assert re.match(r"[0-9]+\.[0-9]+\.[0-9]+", version)
    assert entry["version"] == version
    assert entry["distribution"] == {
        "uvx": {"package": f"{PYPROJECT['project']['name']}=={version}"}
    }
    # The same repository and licence as the package's.
    assert entry["repository"] == PYPROJECT["project"]["urls"]["Repository"]
    assert re.fullmatch(r"https://[^\s/]+/\S+", entry["repository"])
    assert entry["license"] == PYPROJECT["project"]["license"] == "Apache-2.0"
    icon = (ENTRY / "icon.svg").read_text()
    assert re.search(r'width="16"', icon) and re.search(r'height="16"', icon)
    assert 'viewBox="0 0 16 16"' in icon
    colours = re.findall(r'(?:fill|stroke)="([^"]*)"', icon)
    assert colours and set(colours) <= {"currentColor", "none", "inherit"}


def test_the_version_comes_from_one_place_and_the_changelog_names_it():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "agent.__version__"}
    assert importlib.metadata.version(project["name"]) == agent.__version__  # as installed
    said = subprocess.run(
        [_heron_executable(), "--version"], capture_output=True, text=True, timeout=30
    )
    assert said.stdout.strip() == f"heron {agent.__version__}"
    newest = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert newest and newest.group(1) == agent.__version__


def test_the_package_is_licensed_as_it_says():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole text, not a notice
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))
    assert set(project["urls"]) >= {"Homepage", "Repository", "Issues"}
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert all(re.search(r">=[\d.]+,<[\d.]+", r) for r in requires), requires  # bounded


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


def _clean_copy(target: Path) -> Path:
    """The files git would commit, copied (no .venv, caches or build leftovers)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    if not listed:
        pytest.skip("not a git checkout")
    for name in listed.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes((ROOT / name).read_bytes())
    return target


def _warnings(output: str) -> list[str]:
    """pip's warnings about what it installs; not this machine's own pip configuration (a
    find-links folder that is missing)."""
    return [
        line
        for line in output.splitlines()
        if line.startswith(("WARNING", "DEPRECATION")) and "is ignored: it is neither" not in line
    ]


def _runs(env_dir: Path, cwd: Path) -> None:
    """The installed `heron` and `heron-agent` answer as they should."""
    version = subprocess.run(
        [env_dir / "bin" / "heron", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"heron {agent.__version__}"
    helped = subprocess.run(
        [env_dir / "bin" / "heron-agent", "--help"], capture_output=True, text=True, check=True
    )
    assert "usage: heron" in helped.stdout
    # The installed agent answers initialize (nothing it needs was left out).
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    )
    answered = subprocess.run(
        [env_dir / "bin" / "heron-agent"],
        input=line + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert json.loads(answered.stdout.splitlines()[0])["result"]["protocolVersion"] == 1


@pytest.mark.slow
def test_the_sdist_and_the_wheel_build_pass_twine_and_run_from_a_fresh_venv(tmp_path):
    """What would be published: `python -m build` from a clean copy (the wheel built from the
    sdist), `twine check --strict`, the LICENSE inside both, then each installed in a fresh
    venv without a warning and run."""
    source = _clean_copy(tmp_path / "source")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "Warning" not in built.stdout + built.stderr, built.stdout + built.stderr
    version = agent.__version__
    [sdist] = dist.glob(f"heron_agent-{version}.tar.gz")
    [wheel] = dist.glob(f"heron_agent-{version}-py3-none-any.whl")
    print(f"sdist {sdist.stat().st_size / 1024:.0f} KB, wheel {wheel.stat().st_size / 1024:.0f} KB")
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0 and checked.stdout.count("PASSED") == 2, checked.stdout

    license_text = (ROOT / "LICENSE").read_text()
    with zipfile.ZipFile(wheel) as whl:
        info = f"heron_agent-{version}.dist-info"
        assert whl.read(f"{info}/licenses/LICENSE").decode() == license_text
        metadata = whl.read(f"{info}/METADATA").decode()
    with tarfile.open(sdist) as tar:
        root = f"heron_agent-{version}"
        assert tar.extractfile(f"{root}/LICENSE").read().decode() == license_text  # type: ignore[union-attr]
        pkg_info = tar.extractfile(f"{root}/PKG-INFO").read().decode()  # type: ignore[union-attr]
    for meta in (metadata, pkg_info):
        assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
        assert f"Version: {version}" in meta
        assert "Project-URL: Repository, " in meta

    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    installed = subprocess.run(
        [*pip, "--python", python, "install", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr
    assert _warnings(installed.stdout + installed.stderr) == []
    _runs(env_dir, tmp_path)
    # The sdist builds and installs too (its dependencies are there already).
    installed = subprocess.run(
        [*pip, "--python", python, "install", "--force-reinstall", "--no-deps", str(sdist)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr
    assert _warnings(installed.stdout + installed.stderr) == []
    _runs(env_dir, tmp_path)
