"""The ``leanrig`` command line: parses arguments, calls into the packages; no logic here."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from lsp_bridge import LeanrigError, ensure_bootstrap, error_leaves

from ..servers import ignore_stop_signals, on_first, stop_signals
from .logs import configure_logging

if TYPE_CHECKING:
    from ..sessions import ProofService


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    result = ensure_bootstrap(install=True)
    if not args.quiet or result.built:
        print(f"bootstrap Lean: {result.lean} ({result.version_line})")
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_doctor

    report = run_doctor()
    if args.json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for key, value in report.to_json().items():
            print(f"{key:>13}: {value}")
    if report.lean_path is None:
        print("leanrig: no usable Lean. Run `make setup` or set LEANRIG_LEAN.", file=sys.stderr)
        return 2
    return 0 if report.smoke_ok else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo()


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..servers import (
        ServeOptions,
        claimed_stdio,
        freeze_heap,
        listen_local,
        open_service,
        run_event_loop,
    )
    from ..sessions import MAX_SESSIONS_PER_CLIENT, SHARED_CLIENT_SESSIONS

    options = ServeOptions(
        suite=Path(args.suite),
        run_dir=Path(args.run_dir),
        ledger=Path(args.ledger) if args.ledger else None,
        max_processes=args.max_processes,
        step_timeout=args.step_timeout,
        sandbox=not args.no_sandbox,
        task=args.task,
        ray=args.ray,
        condition="lad" if args.lad else args.condition,
        sessions_per_client=SHARED_CLIENT_SESSIONS
        if args.http is not None
        else MAX_SESSIONS_PER_CLIENT,
    )

    stdio = args.port is None and args.http is None
    stop_http = anyio.Event()  # set by a stop signal: the HTTP server shuts down gracefully

    async def main() -> None:
        opened: list[ProofService] = []  # the service, once open (a signal may come before)
        with stop_signals() as signals:
            async with anyio.create_task_group() as tg:
                http = stop_http if args.http is not None else None
                stop = partial(_shut_down, opened, tg.cancel_scope, http)
                tg.start_soon(on_first, signals, stop)
                async with open_service(options) as service:
                    opened.append(service)
                    await run(service)
                    if stdio:
                        # The client closed stdin: it is gone (MCP's stdio shutdown) and waits
                        # for this process to exit; nothing in a Lean process is worth keeping,
                        # so kill the trees now.
                        service.pool.kill_all("stdio client gone")
                tg.cancel_scope.cancel()

    async def run(service: ProofService) -> None:
        if args.jsonrpc:
            from ..servers import serve_stdio, serve_tcp

            freeze_heap()
            if args.port is None:
                await serve_stdio(service, wire)
            else:
                assert listener is not None
                await serve_tcp(service, listener, ready=_announce_port)
            return
        from ..servers import build_mcp

        server = build_mcp(service)
        freeze_heap()
        if args.http is not None:
            assert listener is not None
            await server.run_http_async(listener, stop_http, ready=_announce_url)
        else:
            await server.run_stdio_async(wire)

    # A stdio wire is claimed before anything starts a process (suite library builds, Lean,
    # Ray): no child ever inherits it (servers/fdstreams.py).
    # A network server's port is taken before anything starts (in use: exit 2, no Lean).
    listener = None if stdio else listen_local(args.http if args.port is None else args.port)
    with listener or nullcontext(), claimed_stdio() if stdio else nullcontext(None) as wire:
        run_event_loop(main)
    ignore_stop_signals()  # stopped or done: what is left is exiting
    # Everything is shut down (Lean trees killed, ledger closed, replies written). What is
    # left is the interpreter's final garbage collections over every imported module's
    # objects: ~0.4 s on a loaded 2-core machine, which a stdio client waits for. Those
    # objects die with the process anyway; exclude them from collection.
    gc.freeze()
    return 0


def _announce_port(port: int) -> None:
    print(f"leanrig: JSON-RPC on 127.0.0.1:{port}", file=sys.stderr, flush=True)


def _announce_url(url: str) -> None:
    print(f"leanrig: MCP (streamable HTTP) on {url}", file=sys.stderr, flush=True)


def _shut_down(
    opened: list[ProofService],
    scope: anyio.CancelScope,
    stop_http: anyio.Event | None,
    signum: int,
) -> None:
    """SIGTERM/SIGINT: kill every Lean process first (nothing may outlive the server), then
    cancel the server — or its start, if the service is not open yet (a slow start, e.g. Lean
    processes warming, is cancelled: what it started is closed on the way out); an HTTP server
    that is open is asked to stop instead (``stop_http``), and returns. A thread blocked
    reading stdin, or a slow HTTP shutdown, can delay the exit: bounded by a timer."""
    import os
    import threading

    for service in opened:
        service.pool.kill_all(f"signal {signum}")
    timer = threading.Timer(3.0, os._exit, (128 + signum,))
    timer.daemon = True
    timer.start()
    if opened and stop_http is not None:
        stop_http.set()  # the server returns; main ends the rest
    else:
        scope.cancel()


def _cmd_check(args: argparse.Namespace) -> int:
    import anyio

    from lsp_bridge import find_lean

    from ..tasks import library_dir, load_suite
    from ..verdict import Verifier

    # Only the task checked: another task of the suite that does not load is not its concern.
    suite = load_suite(Path(args.suite).absolute(), only=[args.task])
    task = suite.task(args.task)
    try:
        # The bytes as they are: Python's universal newlines would make a lone carriage
        # return (an error to Lean) a line break. The verifier reads CRLF as Lean does.
        submission = Path(args.submission).absolute().read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"leanrig: cannot read {args.submission}: {exc}", file=sys.stderr)
        return 2
    install = find_lean(suite.root)
    verifier = Verifier(suite, install, library=library_dir(suite, install))
    verdict = anyio.run(verifier.verify, task, submission)
    if args.json:
        print(orjson.dumps(verdict.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        print("ACCEPTED" if verdict.accepted else "REJECTED")
        for reason in verdict.reasons:
            print(f"  - {reason}")
        print(
            f"  axioms: {', '.join(verdict.axioms) or 'none'}; {verdict.elapsed_ms:.0f} ms; "
            f"Lean {verdict.lean_version}"
        )
    return 0 if verdict.accepted else 1


def _cmd_report(args: argparse.Namespace) -> int:
    from ..runs import load_prices, report_runs

    paths = [Path(p).absolute() for p in args.paths]
    prices = load_prices(Path(args.prices).absolute()) if args.prices else None
    if args.out:
        out = Path(args.out).absolute()
    elif len(paths) == 1:
        # A ledger's report goes beside it under its own name: `report/` beside a run's
        # ledger is the run's report, which it overwrote.
        out = paths[0] / "report" if paths[0].is_dir() else paths[0].with_name("ledger-report")
    else:
        out = Path("report").absolute()
    for path in paths:
        if path.is_file() and (path.parent / "results.jsonl").exists():
            print(f"note: {path} belongs to the run {path.parent}: this report counts the "
                  "check_proof calls in its ledger; `leanrig report "
                  f"{path.parent}` reports the run's verdicts", file=sys.stderr)  # fmt: skip
    summary = report_runs(paths, out, plots=not args.no_plots, prices=prices)
    for note in summary.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    print((out / "report.md").read_text(encoding="utf-8"))
    print(
        f"wrote {out / 'report.md'}, {out / 'report.json'}"
        + "".join(f", {p}" for p in summary.get("plots", []))
    )
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..runs import compare_runs, load_prices

    base, lad = Path(args.base).absolute(), Path(args.lad).absolute()
    prices = load_prices(Path(args.prices).absolute()) if args.prices else None
    out = Path(args.out).absolute() if args.out else lad.parent / "compare"
    summary = compare_runs(base, lad, out, plots=not args.no_plots, prices=prices)
    print((out / "compare.md").read_text(encoding="utf-8"))
    print(f"wrote {out / 'compare.md'}, {out / 'compare.json'}"
          + "".join(f", {p}" for p in summary.get("plots", [])))  # fmt: skip
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ..runs import RunOptions, RunSummary, run_benchmark, summary_json

    # Settings left out are None here: RunOptions' defaults, or the recorded ones on --resume.
    settings = {
        "condition": args.condition, "time_limit": args.time_limit, "attempts": args.attempts,
        "parallel": args.parallel, "label": args.label, "model": args.model,
        "agent_tool": args.agent_tool,
        "prices": Path(args.prices).absolute() if args.prices else None,
        "tasks": tuple(dict.fromkeys(args.tasks)) if args.tasks else None,
    }  # fmt: skip
    given = {name: value for name, value in settings.items() if value is not None}
    # A harness run records its preset as its agent (a resume must name the same one).
    agent = f"--harness {args.harness}" if args.harness else args.agent
    options = RunOptions(
        suite=Path(args.suite).absolute(), agent=agent,
        out=Path(args.out).absolute() if args.out else None, resume=args.resume,
        agent_network=args.agent_network, quiet=args.quiet, harness=args.harness,
        harness_bin=Path(args.harness_bin) if args.harness_bin else None,
        reasoning=args.reasoning, model_endpoint=args.model_endpoint,
        model_key_env=args.model_key_env,
        given=frozenset({"agent", *given}), **given,
    )  # fmt: skip
    from lsp_bridge import single_errors

    from ..servers import freeze_heap, run_event_loop

    interrupted: list[int] = []

    async def main() -> RunSummary | None:
        """The run, ended cleanly by SIGTERM/SIGINT: the running attempts are cancelled (their
        agents and Lean killed, the socket directory removed) and the finished ones stay in
        results.jsonl for `--resume`. (A signal used to kill the runner outright, leaving its
        socket directory, or print two tracebacks for Ctrl-C.)"""
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

    # Each attempt's service runs in this process: on the servers' loop (uvloop), as `serve`,
    # over a frozen heap (what importing the run's code allocated: the MCP SDK's models,
    # lsprotocol). Once, here: a freeze per attempt would also keep the cycles of attempts
    # that ended meanwhile for ever.
    freeze_heap()
    summary = run_event_loop(main)
    ignore_stop_signals()  # stopped or done: what is left is saying so
    if summary is None:
        signum = interrupted[0] if interrupted else 2
        where = f" --out {options.out}" if options.out else ""
        print(f"leanrig run: stopped by signal {signum}; finished attempts are in the run's "
              f"results.jsonl (continue with the same command{where} and --resume)",
              file=sys.stderr)  # fmt: skip
        return 128 + signum
    print(orjson.dumps(summary_json(summary)).decode())
    if summary.agent_never_ran:
        codes = sorted({str(r.exit_code) for r in summary.results if r.exit_code is not None})
        how = f"exited with an error (exit code {', '.join(codes)})" if codes else "did not start"
        print(f"leanrig run: every attempt's agent {how} before calling a tool; see "
              f"{summary.run_dir}/attempts/*/*/agent.log and the log's run.agent_start_failed. "
              "The agent command runs in each attempt's workspace: give it absolute paths",
              file=sys.stderr)  # fmt: skip
    return 0


def _cmd_agent(args: argparse.Namespace) -> int:
    if args.agent_kind == "scripted":
        from ..agents import run_scripted_agent

        return anyio.run(
            lambda: run_scripted_agent(
                Path(args.plan).absolute(), mcp_config=args.mcp_config, task=args.task
            )
        )
    from ..agents import run_search_agent

    def main() -> Any:
        a = args
        return run_search_agent(mcp_config=a.mcp_config, task=a.task,
                                max_candidates=a.max_candidates, limit=a.limit,
                                check=a.check)  # fmt: skip

    code: int = anyio.run(main)
    return code


def _cmd_model(args: argparse.Namespace) -> int:
    """`leanrig model serve`: the replay model until SIGTERM/Ctrl-C (exit 0)."""
    from lsp_bridge import single_errors

    from ..models import load_plan, serve_replay_model
    from ..servers import ignore_stop_signals, on_first, stop_signals

    plan = load_plan(Path(args.plan).absolute())
    log_path = Path(args.log).absolute() if args.log else None

    async def main() -> None:
        with single_errors(), stop_signals() as signals:
            async with anyio.create_task_group() as tg:
                url = await tg.start(
                    partial(serve_replay_model, plan, host=args.host, port=args.port, log=log_path)
                )
                print(f"leanrig model: replaying {args.plan} at {url}", file=sys.stderr,
                      flush=True)  # fmt: skip
                await on_first(signals, lambda _signum: tg.cancel_scope.cancel())
                tg.cancel_scope.cancel()

    anyio.run(main)
    ignore_stop_signals()
    return 0


def _cmd_editor(args: argparse.Namespace) -> int:
    from ..editor import add_edit_arguments, add_lsp_arguments, cmd_edit, cmd_lsp

    name: str = args.editor_command
    parser = argparse.ArgumentParser(prog=f"leanrig {name}")
    if name == "edit":
        add_edit_arguments(parser)
        return cmd_edit(parser.parse_args(args.rest))
    add_lsp_arguments(parser)
    return cmd_lsp(parser.parse_args(args.rest))


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _task_ids(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise argparse.ArgumentTypeError(f"no task id in {text!r}")
    return ids


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leanrig", description=__doc__)
    # Also after the subcommand (`leanrig serve … --log-level info`, as docs/cli.md lists it).
    common = argparse.ArgumentParser(add_help=False)
    for where, default in ((parser, "warning"), (common, argparse.SUPPRESS)):
        where.add_argument("--log-level", default=default, choices=LOG_LEVELS, type=str.lower,
                           help="structlog level (JSON on stderr)")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    boot = command("bootstrap", help="build the zero-install Lean (idempotent)")
    boot.add_argument("--quiet", action="store_true")
    boot.set_defaults(func=_cmd_bootstrap)

    doctor = command("doctor", help="which Lean, its mode, sandbox tools, smoke test")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=_cmd_doctor)

    demo = command("demo", help="a scripted agent solving a demo task over MCP")
    demo.set_defaults(func=_cmd_demo)

    serve = command("serve", help="serve a suite's agent tools (MCP stdio by default)")
    serve.add_argument("--suite", required=True, help="suite directory (with suite.toml)")
    serve.add_argument("--jsonrpc", action="store_true", help="plain JSON-RPC 2.0, one per line")
    serve.add_argument("--port", type=int, help="with --jsonrpc: TCP on 127.0.0.1:PORT")
    serve.add_argument("--http", type=int, metavar="PORT", help="MCP over streamable HTTP")
    serve.add_argument("--run-dir", default="runs", help="where run data and the ledger go")
    serve.add_argument("--ledger", help="ledger path (default: RUN_DIR/<timestamp>/ledger.jsonl)")
    serve.add_argument("--max-processes", type=_positive(int),
                       help="Lean server processes in the pool")  # fmt: skip
    serve.add_argument("--step-timeout", type=_positive(float), default=60.0,
                       help="seconds per Lean wait")  # fmt: skip
    serve.add_argument("--no-sandbox", action="store_true", help="run Lean without bwrap/rlimits")
    serve.add_argument("--task", help="serve only this task (one `leanrig run` attempt)")
    serve.add_argument("--ray", metavar="ADDRESS", help="the pool on a Ray cluster: ADDRESS or "
                       "auto (needs leanrig[ray]; docs/scale-out.md)")  # fmt: skip
    serve.add_argument("--condition", choices=["baseline", "lad"], default="baseline",
                       help="lad: also serve search_library/read_library over the suite's "
                       "[lad] library (docs/agent-tools.md)")  # fmt: skip
    serve.add_argument("--lad", action="store_true", help="the same as --condition lad")
    serve.set_defaults(func=_cmd_serve)

    check = command("check", help="the final verdict on a submission (exit 0/1/2)")
    check.add_argument("--suite", required=True)
    check.add_argument("--task", required=True)
    check.add_argument("submission", help="the submitted .lean file")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=_cmd_check)

    report = command(
        "report", help="metrics of runs, or latency report of a ledger (markdown, JSON, PNG)"
    )
    report.add_argument(
        "paths", nargs="+", metavar="RUN_DIR_OR_LEDGER",
        help="run directories (leanrig run, leanrig lsp) or a ledger.jsonl; several: a leaderboard",
    )  # fmt: skip
    report.add_argument("--out", help="output directory (default: RUN_DIR/report; for a ledger "
                        "file, ledger-report/ beside it)")  # fmt: skip
    report.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    report.add_argument("--prices", help="price schedule TOML (docs/runs.md)")
    report.set_defaults(func=_cmd_report)

    compare = command("compare", help="baseline vs library access: relative changes")
    compare.add_argument("base", metavar="BASE_DIR", help="the baseline run directory")
    compare.add_argument("lad", metavar="LAD_DIR", help="the library-access run directory")
    compare.add_argument("--out", help="output directory (default: next to LAD_DIR, compare/)")
    compare.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    compare.add_argument("--prices", help="price schedule TOML (docs/runs.md)")
    compare.set_defaults(func=_cmd_compare)

    run = command("run", help="run an agent over a suite (the benchmark run protocol)")
    run.add_argument("--suite", required=True, help="suite directory (with suite.toml)")
    who = run.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", help="agent command; {prompt} {task} {workspace} {mcp_config} "
                     "are replaced")  # fmt: skip
    who.add_argument("--harness", choices=["claude-code", "codex"],
                     help="a published agent harness, set up per attempt")  # fmt: skip
    run.add_argument("--condition", choices=["baseline", "lad"], help="default baseline")
    run.add_argument("--time-limit", type=float, help="seconds per invocation (default 1800)")
    run.add_argument("--attempts", type=int, help="independent attempts per task (default 1)")
    run.add_argument("--parallel", type=int, help="attempts at once (default 1)")
    run.add_argument("--out", help="run directory (default runs/run-<timestamp>)")
    run.add_argument("--label", help="the run's name in reports")
    run.add_argument("--model", help="model name (run.json, prices)")
    run.add_argument("--agent-tool", help="agent tool name (run.json)")
    run.add_argument("--prices", help="price schedule TOML (docs/runs.md)")
    run.add_argument("--tasks", type=_task_ids, action="extend", metavar="ID[,ID…]",
                     help="run only these tasks (default: every task of the suite)")  # fmt: skip
    run.add_argument("--resume", action="store_true", help="continue an interrupted run")
    networks = ["none", "model", "all"]
    run.add_argument("--agent-network", nargs="?", const="all", choices=networks,
                     help="what the agent reaches: none, its model through the run's gateway "
                     "(default with --harness or --model-endpoint), or all (bare)")  # fmt: skip
    run.add_argument("--harness-bin", metavar="PATH",
                     help="the harness's program (default: PATH, `make harnesses`)")  # fmt: skip
    run.add_argument("--reasoning", metavar="LEVEL",
                     help="the harness's reasoning effort (Claude Code --effort, Codex "
                     "model_reasoning_effort)")  # fmt: skip
    run.add_argument("--model-endpoint", metavar="URL",
                     help="where the run's model gateway forwards model calls (default with "
                     "--harness: the vendor's API)")  # fmt: skip
    run.add_argument("--model-key-env", metavar="NAME",
                     help="the environment variable holding the model's API key (default: "
                     "ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN, OPENAI_API_KEY)")  # fmt: skip
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.set_defaults(func=_cmd_run)

    model = command("model", help="the replay model: a local model endpoint for offline runs")
    model_kinds = model.add_subparsers(dest="model_command", required=True)
    replay = model_kinds.add_parser(
        "serve", help="replay a plan of tool calls as a model (Anthropic Messages, OpenAI "
        "Responses and Chat Completions)",
    )  # fmt: skip
    replay.add_argument("--plan", required=True, help="the plan (docs/agents.md)")
    replay.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    replay.add_argument("--port", type=int, default=0, help="default 0: a free port, said on "
                        "stderr")  # fmt: skip
    replay.add_argument("--log", help="one JSON line per call served (tokens as served)")
    replay.set_defaults(func=_cmd_model)

    agent = command("agent", help="agents leanrig ships, for `leanrig run --agent`")
    kinds = agent.add_subparsers(dest="agent_kind", required=True)
    scripted = kinds.add_parser("scripted", help="replay a JSON plan of tool calls")
    scripted.add_argument("--plan", required=True, help="the plan (docs/agents.md)")
    search = kinds.add_parser("search", help="a model-free prover: candidate terms via try_proofs")
    search.add_argument("--max-candidates", type=int, default=400, help="candidates to try")
    search.add_argument("--limit", type=int, default=8, help="search_library hits per query")
    search.add_argument("--check", action="store_true", help="call check_proof at the end")
    for kind in (scripted, search):
        kind.add_argument("--mcp-config", help="MCP config (default: $LEANRIG_MCP_CONFIG)")
        kind.add_argument("--task", help="task id (default: $LEANRIG_TASK, else the first)")
    agent.set_defaults(func=_cmd_agent)

    # The editor layer costs ~1 s of imports; only `edit` and `lsp` load it (their arguments
    # are parsed by the editor's own parser from what follows the command name).
    for name, text in (
        ("edit", "prepare an editor workspace for a human attempt at one task"),
        ("lsp", "LSP on stdio for an editor: one task, scoped and timed, sandboxed Lean"),
    ):
        editor = command(name, help=text, add_help=False)
        editor.set_defaults(func=_cmd_editor, editor_command=name, takes_rest=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if getattr(args, "takes_rest", False):
        args.rest = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "serve" and args.port is not None and not args.jsonrpc:
        parser.error("--port serves JSON-RPC: add --jsonrpc (MCP over the network: --http PORT)")
    if args.command == "serve" and args.http is not None and args.jsonrpc:
        parser.error("--http serves MCP; JSON-RPC over the network is --jsonrpc --port N")
    configure_logging(args.log_level)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # a reader that went is found here, not at the interpreter's exit
    except LeanrigError as exc:
        print(f"leanrig: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went (`leanrig report RUN | head`): no traceback, and no second error
        # when the interpreter flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE
    except BaseExceptionGroup as group:
        # A command that runs in a task group (`lsp`) raises its errors wrapped in a group.
        refused, other = group.split(LeanrigError)
        if refused is None or other is not None:
            raise
        for error in error_leaves(refused):
            print(f"leanrig: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
