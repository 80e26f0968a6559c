"""The README's Python quickstart has you save a file in the repository root: git must not list it."""

from __future__ import annotations

import re
import subprocess

from tests.worker_process import ROOT


def test_the_file_the_readme_has_you_save_in_the_repository_root_is_ignored_by_git():
    readme = " ".join((ROOT / "README.md").read_text().split())
    saved = re.findall(r"Save this as `([^`]+)` in the repository root", readme)

    assert saved == ["quickstart.py"]
    for name in saved:
        # --no-index: the rules alone decide, whether or not someone already added the file.
        ignored = subprocess.run(["git", "check-ignore", "--no-index", "--quiet", name], cwd=ROOT, timeout=30)
        assert ignored.returncode == 0, f"{name} would show up in `git status`"
