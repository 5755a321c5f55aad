"""`leanrig equiv` as a user types it: a subprocess from their directory, relative paths, the
report or JSON, and the exit status (0 equivalent, 1 not shown, 2 usage or invalid)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .test_as_typed import leanrig, leanrig_each, sandbox_or_skip

FIXTURES = Path(__file__).parent / "fixtures" / "equiv"


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A user's directory: the standalone file, and a copy of the fixture suite with a file
    that imports its library."""
    sandbox_or_skip()
    shutil.copy(FIXTURES / "Standalone.lean", tmp_path / "Standalone.lean")
    shutil.copytree(FIXTURES, tmp_path / "equiv")
    return tmp_path


def test_leanrig_equiv_as_typed(cwd: Path) -> None:
    same, wrong, broken, suite = leanrig_each(
        ("equiv", "Standalone.lean", "--first", "Claim.reference", "--second", "Claim.candidate"),
        ("equiv", "Standalone.lean", "--first", "Claim.reference", "--second", "Claim.wrong",
         "--json", "--budget", "15"),
        ("equiv", "Standalone.lean", "--first", "Claim.reference", "--second", "Claim.broken"),
        ("equiv", "equiv/Chains.lean", "--suite", "equiv", "--first", "Chains.reference",
         "--second", "Chains.candidate", "--json"),
        cwd=cwd,
    )  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("EQUIVALENT: Claim.reference (reference) and Claim.candidate")
    assert "forward (Claim.reference ⇒ Claim.candidate): proved by apply" in same.stdout
    assert "theorem leanrig_equiv_backward (base : type_of% @_root_.«Claim».«candidate»)" in (
        same.stdout
    )

    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    shown = json.loads(wrong.stdout)
    assert shown["outcome"] == "not_equivalent" and shown["reasons"] == []
    assert shown["forward"]["outcome"] == shown["backward"]["outcome"] == "not_shown"

    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert broken.stdout.startswith("INVALID") and "Claim.broken" in broken.stdout

    assert suite.returncode == 0, suite.stdout + suite.stderr
    graded = json.loads(suite.stdout)
    assert graded["outcome"] == "equivalent" and graded["portfolio"] == "bootstrap-terms/1"
    assert graded["forward"]["proof"] and "base" in graded["forward"]["proof"]


def test_usage_errors_exit_2(cwd: Path) -> None:
    missing = leanrig("equiv", "Standalone.lean", "--first", "Claim.reference", cwd=cwd)
    assert missing.returncode == 2 and "--second" in missing.stderr
    nofile = leanrig("equiv", "Nope.lean", "--first", "A", "--second", "B", cwd=cwd)
    assert nofile.returncode == 2 and "cannot read Nope.lean" in nofile.stderr
    nosuite = leanrig("equiv", "equiv/Chains.lean", "--suite", "nowhere", "--first", "A",
                      "--second", "B", cwd=cwd)  # fmt: skip
    assert nosuite.returncode == 2 and "no such suite directory" in nosuite.stderr
