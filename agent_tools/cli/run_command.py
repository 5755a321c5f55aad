"""`leanrig run` and `leanrig model serve`, each ended cleanly by SIGTERM/Ctrl-C; no logic here."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import anyio
import orjson

from ..servers import on_first, stop_signals


def cmd_run(args: argparse.Namespace) -> int:
    from ..runs import RunOptions, RunSummary, run_benchmark, summary_json

    # None: RunOptions' defaults, or the recorded ones on --resume.
    settings = {
        "condition": args.condition,
        "time_limit": args.time_limit,
        "attempts": args.attempts,
        "parallel": args.parallel,
        "label": args.label,
        "model": args.model,
        "agent_tool": args.agent_tool,
        "prices": Path(args.prices).absolute() if args.prices else None,
        "tasks": tuple(dict.fromkeys(args.tasks)) if args.tasks else None,
    }
    given = {name: value for name, value in settings.items() if value is not None}
    agent = f"--harness {args.harness}" if args.harness else args.agent
    options = RunOptions(
        suite=Path(args.suite).absolute(),
        agent=agent,
        out=Path(args.out).absolute() if args.out else None,
        resume=args.resume,
        agent_network=args.agent_network,
        quiet=args.quiet,
        harness=args.harness,
        harness_bin=Path(args.harness_bin) if args.harness_bin else None,
        reasoning=args.reasoning,
        model_endpoint=args.model_endpoint,
        model_key_env=args.model_key_env,
        ray=args.ray,
        attempt_memory_mb=args.attempt_memory,
        agent_home=Path(args.agent_home).absolute() if args.agent_home else None,
        equiv_budget=args.equiv_budget,
        record_model_io=args.record_model_io,
        given=frozenset({"agent", *given}),
        **given,
    )
    from lsp_bridge import single_errors

    from ..servers import freeze_heap, run_event_loop

    interrupted: list[int] = []

    async def main() -> RunSummary | None:
        """The run; SIGTERM/SIGINT cancels running attempts, finished ones stay for `--resume`."""
        done: list[RunSummary] = []
        with single_errors(), stop_signals() as signals:
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    done.append(await run_benchmark(options))
                    tg.cancel_scope.cancel()

                def stop(signum: int) -> None:
                    interrupted.append(signum)
                    tg.cancel_scope.cancel()

                tg.start_soon(on_first, signals, stop)
                tg.start_soon(run)
        return done[0] if done else None

    # Once, here: a freeze per attempt would keep finished attempts' cycles for ever.
    freeze_heap()
    summary = run_event_loop(main)
    if summary is None:
        signum = interrupted[0] if interrupted else 2
        where = f" --out {options.out}" if options.out else ""
        print(
            f"leanrig run: stopped by signal {signum}; finished attempts are in the run's "
            f"results.jsonl (continue with the same command{where} and --resume)",
            file=sys.stderr,
        )
        return 128 + signum
    print(orjson.dumps(summary_json(summary)).decode())
    if summary.agent_never_ran:
        codes = sorted({str(r.exit_code) for r in summary.results if r.exit_code is not None})
        how = f"exited with an error (exit code {', '.join(codes)})" if codes else "did not start"
        print(
            f"leanrig run: every attempt's agent {how} before calling a tool; see "
            f"{summary.run_dir}/attempts/*/*/agent.log and the log's run.agent_start_failed. "
            "The agent command runs in each attempt's workspace: give it absolute paths",
            file=sys.stderr,
        )
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    """`leanrig model serve`: the replay model until SIGTERM/Ctrl-C (exit 0)."""
    from lsp_bridge import single_errors

    from ..models import load_plan, serve_replay_model
    from ..servers import on_first, stop_signals

    plan = load_plan(Path(args.plan).absolute())
    log_path = Path(args.log).absolute() if args.log else None

    async def main() -> None:
        with single_errors(), stop_signals() as signals:
            async with anyio.create_task_group() as tg:
                url = await tg.start(
                    partial(serve_replay_model, plan, host=args.host, port=args.port, log=log_path)
                )
                print(f"leanrig model: replaying {args.plan} at {url}", file=sys.stderr, flush=True)
                await on_first(signals, lambda _signum: tg.cancel_scope.cancel())
                tg.cancel_scope.cancel()

    anyio.run(main)
    return 0
