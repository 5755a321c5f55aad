"""Edit → fresh diagnostics through `leanrig lsp` vs straight to `lean --server`, same run.

The same minimal blocking client (raw_lsp.RawLean: full-text change, then
`textDocument/waitForDiagnostics`) drives Lean directly and through the editor proxy (which
scopes the task file, merges diagnostics and writes a ledger line per version). Sandboxed and
unsandboxed proxy runs separate the proxy's own cost from bwrap/prlimit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from lsp_bridge import PRELUDE_HEADER, PRELUDE_SORRY, REPORT_DELAY_MS, find_lean

from .common import print_table, summarize, write_result
from .raw_lsp import time_alternating_edits

HEADER = PRELUDE_HEADER + PRELUDE_SORRY  # (every variant's file starts so)
GOOD = "theorem foo : @Eq N N.z N.z := @Eq.refl N N.z\n"
BAD = "theorem foo : @Eq N N.z N.z := @Eq.refl N N.s\n"
PLACEHOLDER = "theorem foo : @Eq N N.z N.z := sorryAx (@Eq N N.z N.z) N.z\n"  # the task file's
SUITE_TOML = """name = "bench-editor"
lean = "prelude"

[[tasks]]
id = "foo"
file = "Raw.lean"
theorem = "foo"
difficulty = 1
"""


def _suite(root: Path) -> Path:
    suite = root / "suite"
    suite.mkdir()
    (suite / "suite.toml").write_text(SUITE_TOML)
    (suite / "Raw.lean").write_text(HEADER + PLACEHOLDER)
    return suite


def proxy_argv(suite: Path, workspace: Path, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "agent_tools.editor", "lsp", "--suite", str(suite), "--task",
            "foo", "--workspace", str(workspace), "--run-dir", str(run_dir), *extra]  # fmt: skip


def run(quick: bool = False) -> dict[str, Any]:
    steps = 20 if quick else 200
    bad, good = HEADER + BAD, HEADER + GOOD
    rows: dict[str, dict[str, float]] = {}
    with TemporaryDirectory(prefix="leanrig-bench-editor-") as tmp:
        root = Path(tmp)
        suite = _suite(root)
        direct = root / "direct"
        direct.mkdir()
        lean = [str(find_lean().lean), "--server", f"-Dserver.reportDelayMs={REPORT_DELAY_MS}"]
        variants = {
            "lean --server (direct)": (lean, direct),
            "leanrig lsp, no sandbox": (
                proxy_argv(suite, root / "ws1", root / "run1", "--no-sandbox"), root / "ws1"),
            "leanrig lsp (sandboxed)": (
                proxy_argv(suite, root / "ws2", root / "run2"), root / "ws2"),
        }  # fmt: skip
        samples: dict[str, list[float]] = {name: [] for name in variants}
        rounds = 4 if quick else 10
        for _ in range(rounds):  # interleaved rounds: machine load hits every variant alike
            for name, (argv, cwd) in variants.items():
                cwd.mkdir(exist_ok=True)
                samples[name] += time_alternating_edits(argv, cwd, bad, good, steps // rounds)
        for name, values in samples.items():
            rows[name] = summarize(values)
    print_table("edit → fresh diagnostics (1 declaration)", rows, "lean --server (direct)")
    ref = rows["lean --server (direct)"]["median_ms"]
    added = {name: round(s["median_ms"] - ref, 3) for name, s in rows.items()}
    print(f"\nadded at the median (ms): {added}")
    write_result("editor", {"steps": steps, "results": rows, "ratios": {"added_median_ms": added}})
    return {"results": rows, "ratios": {"added_median_ms": added}}


if __name__ == "__main__":
    run()
