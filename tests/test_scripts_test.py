"""scripts/test installs only when pyproject.toml changed (a stamp in .venv), checks the types
(mypy), compiles Heron once, then runs pytest; a type error stops it before the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fake_checkout(tmp_path: Path, mypy_status: int = 0) -> Path:
    """A copy of scripts/test and pyproject.toml with a stand-in venv; returns the call log."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    calls = tmp_path / "calls.log"
    # A stand-in interpreter: -c runs for real, -m pip / mypy / pytest are only logged (mypy
    # then exits with `mypy_status`).
    (bin_dir / "python").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\n'
        f'echo "$*" >> {calls}\n'
        f'if [ "$2" = "mypy" ]; then exit {mypy_status}; fi\n'
    )
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "heron").write_text("#!/bin/sh\n")
    (bin_dir / "heron").chmod(0o755)
    return calls


def test_scripts_test_reinstalls_only_when_pyproject_changes(tmp_path: Path):
    calls = fake_checkout(tmp_path)

    def run() -> list[str]:
        calls.write_text("")
        subprocess.run([tmp_path / "scripts" / "test", "-k", "x"], check=True, timeout=60)
        return calls.read_text().splitlines()

    first = run()
    assert any("-m pip install" in line for line in first) and "pytest" in first[-1]
    second = run()
    assert second[:2] == ["-m mypy agent", "-m compileall -q agent"]  # Heron compiled once
    assert len(second) == 3 and second[2].startswith("-m pytest") and second[2].endswith("-k x")
    with (tmp_path / "pyproject.toml").open("a") as f:
        f.write("\n# a change\n")
    assert any("-m pip install" in line for line in run())


def test_scripts_test_stops_before_the_tests_when_mypy_fails(tmp_path: Path):
    calls = fake_checkout(tmp_path, mypy_status=1)
    done = subprocess.run([tmp_path / "scripts" / "test"], timeout=60)
    logged = calls.read_text().splitlines()
    assert done.returncode != 0
    assert "-m mypy agent" in logged and not any("pytest" in line for line in logged)
