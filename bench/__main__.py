"""`make bench` / `python -m bench [--quick] [names...]`: every benchmark, one SUMMARY.md."""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

import orjson

from agent_tools.logs import configure_logging

from .common import RESULTS

BENCHES = {
    "lsp_bridge": "bench.bench_lsp",
    "pool": "bench.bench_pool",
    "agent_step": "bench.bench_agent",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small versions of every benchmark")
    parser.add_argument("names", nargs="*", choices=[*BENCHES, []], default=[])
    args = parser.parse_args()
    configure_logging()
    names = args.names or list(BENCHES)
    summary: dict[str, Any] = {}
    for name in names:
        t = time.perf_counter()
        print(f"\n# {name}")
        module = importlib.import_module(BENCHES[name])
        summary[name] = module.run(quick=args.quick)
        print(f"({name}: {time.perf_counter() - t:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    lines = ["# leanrig benchmark summary", "", f"quick: {args.quick}", ""]
    for name, result in summary.items():
        lines += [
            f"## {name}",
            "",
            "```json",
            orjson.dumps(result, option=orjson.OPT_INDENT_2).decode(),
            "```",
            "",
        ]
    (RESULTS / "SUMMARY.md").write_text("\n".join(lines))
    print(f"\nwrote {RESULTS / 'SUMMARY.md'}")


if __name__ == "__main__":
    main()
