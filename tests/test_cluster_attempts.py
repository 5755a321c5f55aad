"""The pure parts of `leanrig run --ray`: which nodes take an attempt, an attempt's directory
packed and unpacked (caps, links, paths out of it), the suite on a node, `--attempt-memory`."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from agent_tools.cli.main import build_parser
from agent_tools.runs import RunOptions
from agent_tools.runs.cluster_attempt import NodePlan, pack_attempt, suite_files, suite_here
from agent_tools.runs.cluster_run import lean_nodes, unpack_attempt
from agent_tools.tasks import load_suite
from lsp_bridge import LeanrigError

from .test_as_typed import DEMO

GB = 2**30


def node(alive: bool = True, slots: float = 1, memory: float = 8 * GB) -> dict[str, object]:
    return {
        "Alive": alive,
        "NodeID": "f" * 56,
        "NodeManagerAddress": "10.0.0.7",
        "Resources": {"lean_slots": slots, "memory": memory, "CPU": 4},
    }


def test_only_alive_nodes_with_a_slot_and_the_memory_take_attempts() -> None:
    nodes = [node(), node(alive=False), node(slots=0), node(memory=1 * GB)]
    assert lean_nodes(nodes, memory_mb=4096) == ["10.0.0.7 (ffffffffffff)"]
    assert lean_nodes(nodes, memory_mb=512) == ["10.0.0.7 (ffffffffffff)"] * 2
    assert lean_nodes([{"Alive": True, "Resources": {}}], memory_mb=1) == []


@pytest.mark.parametrize(
    ("text", "mb"), [("8G", 8192), ("8GiB", 8192), ("512M", 512), ("512", 512), ("1.5g", 1536)]
)
def test_attempt_memory_reads_sizes(text: str, mb: int) -> None:
    args = build_parser().parse_args(
        ["run", "--suite", "s", "--agent", "a", "--attempt-memory", text]
    )
    assert args.attempt_memory == mb


@pytest.mark.parametrize("text", ["lots", "0.5M", "G"])
def test_attempt_memory_refuses_what_is_no_size(text: str) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--suite", "s", "--agent", "a", "--attempt-memory", text])


def attempt_dir(root: Path) -> Path:
    (root / "workspace").mkdir(parents=True)
    (root / "serve").mkdir()
    (root / "ledger.jsonl").write_text('{"tool": "open_task"}\n')
    (root / "agent.log").write_text("agent output\n")
    (root / "workspace" / "Submission.lean").write_text("theorem t : True := True.intro\n")
    (root / "serve" / "submission-1.json").write_text("{}")
    return root


def test_an_attempt_directory_comes_home_whole(tmp_path: Path) -> None:
    src = attempt_dir(tmp_path / "node" / "attempts" / "t" / "1")
    (src / "workspace" / "notes").mkdir()
    (src / "workspace" / "notes" / "ü.txt").write_text("unicode name")
    os.symlink("Submission.lean", src / "workspace" / "link.lean")
    files, left_out = pack_attempt(src)
    assert left_out == []
    home = tmp_path / "home" / "attempts" / "t" / "1"
    home.mkdir(parents=True)
    (home / "stale").write_text("from an earlier try")
    assert unpack_attempt(files, home) == []
    assert not (home / "stale").exists()
    for rel in (
        "ledger.jsonl",
        "agent.log",
        "workspace/Submission.lean",
        "serve/submission-1.json",
        "workspace/notes/ü.txt",
    ):
        assert (home / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert os.readlink(home / "workspace" / "link.lean") == "Submission.lean"


def test_what_an_agent_leaves_that_cannot_come_home_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = attempt_dir(tmp_path / "a")
    (src / "workspace" / "big.bin").write_bytes(b"x" * 4096)
    os.mkfifo(src / "workspace" / "pipe")
    os.symlink("/etc/passwd", src / "workspace" / "escape")
    monkeypatch.setattr("agent_tools.runs.cluster_attempt.FILE_CAP", 1024)
    files, left_out = pack_attempt(src)
    assert "workspace/big.bin (4096 bytes)" in left_out
    assert "workspace/pipe (not a regular file)" in left_out
    home = tmp_path / "home"
    refused = unpack_attempt(files, home)
    # A link out of the attempt's directory is not recreated at home.
    assert [r.split(" ")[0] for r in refused] == ["workspace/escape"]
    assert not (home / "workspace" / "escape").exists()
    assert (home / "ledger.jsonl").is_file()


def test_a_tar_naming_paths_outside_its_directory_is_not_unpacked_there(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("../outside.txt", "/tmp/absolute.txt", "ok.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    home = tmp_path / "home"
    refused = unpack_attempt(buffer.getvalue(), home)
    assert not (tmp_path / "outside.txt").exists()
    assert (home / "ok.txt").read_text() == "hi"
    assert [r.split(" ")[0] for r in refused] == ["../outside.txt"]
    # An absolute name lands inside, made relative (the data filter), never at that path.
    assert not (tmp_path / "absolute.txt").exists()
    inside = [p for p in home.rglob("absolute.txt")]
    assert [p.read_text() for p in inside] == ["hi"], sorted(home.rglob("*"))


def plan(suite_root: Path, shipped_from: Path) -> NodePlan:
    suite = load_suite(shipped_from)
    return NodePlan(
        options=RunOptions(suite=suite_root, agent="a"),
        suite_root=suite_root,
        suite_hash=suite.content_hash(),
        suite_files=suite_files(suite),
        lean_version="4.35.0",
        harness=None,
        route=None,
    )


def test_a_node_uses_the_suite_at_the_same_path(tmp_path: Path) -> None:
    root = shutil.copytree(DEMO, tmp_path / "demo")
    assert suite_here(plan(root, root)).root == root


def test_a_node_without_the_suite_unpacks_the_shipped_prelude_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "cache"))
    source = shutil.copytree(DEMO, tmp_path / "starting-machine" / "demo")
    p = plan(tmp_path / "elsewhere" / "demo", source)
    suite = suite_here(p)
    assert suite.content_hash() == p.suite_hash and suite.root != p.suite_root
    assert sorted(suite.tasks) == sorted(load_suite(source).tasks)
    assert suite_here(p).root == suite.root
    # A different suite at the path is not used: the shipped one is.
    changed = shutil.copytree(DEMO, tmp_path / "elsewhere" / "demo")
    (changed / "suite.toml").write_text((changed / "suite.toml").read_text() + "\n# edited\n")
    assert suite_here(p).root == suite.root


def test_a_full_toolchain_suite_must_be_at_the_same_path(tmp_path: Path) -> None:
    source = shutil.copytree(DEMO, tmp_path / "demo")
    toml = source / "suite.toml"
    toml.write_text(toml.read_text().replace('lean = "prelude"', 'lean = "full"'))
    p = plan(tmp_path / "missing", source)
    with pytest.raises(LeanrigError) as caught:
        suite_here(p)
    assert "must be at the same path" in caught.value.hint
