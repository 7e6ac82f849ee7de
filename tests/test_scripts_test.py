"""scripts/test installs only when pyproject.toml changed (a stamp in .venv), then runs pytest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_scripts_test_reinstalls_only_when_pyproject_changes(tmp_path: Path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    calls = tmp_path / "calls.log"
    # A stand-in interpreter: -c runs for real, -m pip / -m pytest are only logged.
    (bin_dir / "python").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\n'
        f'echo "$*" >> {calls}\n'
    )
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "heron").write_text("#!/bin/sh\n")
    (bin_dir / "heron").chmod(0o755)

    def run() -> list[str]:
        calls.write_text("")
        subprocess.run([tmp_path / "scripts" / "test", "-k", "x"], check=True, timeout=60)
        return calls.read_text().splitlines()

    first = run()
    assert any("-m pip install" in line for line in first) and "pytest" in first[-1]
    second = run()
    assert len(second) == 1 and second[0].startswith("-m pytest") and second[0].endswith("-k x")
    with (tmp_path / "pyproject.toml").open("a") as f:
        f.write("\n# a change\n")
    assert any("-m pip install" in line for line in run())
