"""What workspace trust and skills cost, in process (medians over --runs, wall time):

- opening a session's trust (what `session/new` pays before its answer: the repository's
  root, the remembered decision, the inventory of what stays inert): an empty folder, and a
  repository with command files, skills, a `.git/config` and hooks;
- the git settings a command gets while the project is untrusted (`agent.trust.git.guard_env`,
  one `git config --list` per command in a repository; none outside one), beside the
  command itself (`bash -c true`, started as the local runner does);
- finding 100 skills, and the size of the system prompt's list of them.

    python scripts/bench_trust.py [--runs 50]

Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.session import open_trust_of
from agent.skills.catalog import catalog
from agent.skills.discovery import find_skills
from agent.trust.git import guard_env


def median_ms(runs: int, job: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        job()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def row(label: str, ms: float) -> None:
    print(f"  {label + ':':32}{ms:7.2f} ms")


def project(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "config", "core.fsmonitor", "/bin/true"], cwd=repo, check=True)
    (repo / ".heron" / "commands").mkdir(parents=True)
    for n in range(5):
        (repo / ".heron" / "commands" / f"c{n}.md").write_text("Do it.\n")
        skill = repo / ".agents" / "skills" / f"s{n}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: s{n}\ndescription: d\n---\nBody.\n")
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_CONFIG_HOME"] = str(root / "config")
        os.environ["HOME"] = str(root / "home")
        (root / "home").mkdir()
        empty = root / "empty"
        empty.mkdir()
        repo = project(root)
        print(f"opening a session's trust ({runs} runs, median):")
        row("empty folder", median_ms(runs, lambda: open_trust_of(empty)))
        row("repository with 5+5+git items", median_ms(runs, lambda: open_trust_of(repo)))

        def command() -> None:
            subprocess.run(["bash", "-c", "true"], cwd=repo, check=True)

        print("a command in an untrusted folder:")
        row("bash -c true itself", median_ms(runs, command))
        row("+ git settings, in a repo", median_ms(runs, lambda: guard_env(repo)))
        row("+ git settings, outside one", median_ms(runs, lambda: guard_env(empty)))

        skills = root / "home" / ".agents" / "skills"
        for n in range(100):
            folder = skills / f"skill-{n:03d}"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: skill-{n:03d}\ndescription: {'A description. ' * 15}\n---\n"
                + "Instructions.\n" * 100
            )
        found = find_skills(empty, empty, False)
        listed = catalog(found.skills)
        print("skills:")
        print(
            f"  finding 100 skills:            "
            f"{median_ms(max(5, runs // 5), lambda: find_skills(empty, empty, False)):6.2f} ms"
        )
        print(
            f"  the system prompt's list:      {len(listed):6d} characters "
            f"(~{len(listed) // 4} tokens; 40 listed of {len(found.skills)})"
        )


if __name__ == "__main__":
    main()
