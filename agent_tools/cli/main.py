"""The ``leanrig`` command line: parses arguments, calls into the packages; no logic here."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson

from lsp_bridge import LeanrigError, ensure_bootstrap, error_leaves

from .arg_types import positive
from .equiv_command import add_equiv_command
from .export_command import add_export_command
from .logs import configure_logging
from .plan_command import add_plan_from_command
from .run_command import cmd_model, cmd_run
from .serve_command import cmd_serve
from .suite_command import add_suite_command


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    result = ensure_bootstrap(install=True)
    if not args.quiet or result.built:
        print(f"bootstrap Lean: {result.lean} ({result.version_line})")
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    if args.ray is not None:
        return _cmd_doctor_ray(args)
    given = [
        o
        for o, v in (
            ("--suite", args.suite),
            ("--harness", args.harness),
            ("--harness-bin", args.harness_bin),
        )
        if v is not None
    ]
    if given:
        raise LeanrigError(
            f"{', '.join(given)}: what every node of a cluster must have",
            hint="add --ray ADDRESS (or --ray auto)",
        )
    from .doctor import run_doctor

    report = run_doctor()
    if args.json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for key, value in report.to_json().items():
            if isinstance(value, dict):
                print(f"{key:>13}:")
                for name, path in value.items():
                    print(f"{name:>15}  {path}")
            else:
                print(f"{key:>13}: {value}")
    if report.lean_path is None:
        print("leanrig: no usable Lean. Run `make setup` or set LEANRIG_LEAN.", file=sys.stderr)
        return 2
    return 0 if report.smoke_ok else 1


def _cmd_doctor_ray(args: argparse.Namespace) -> int:
    from .doctor_cluster import run_cluster_doctor

    if args.harness_bin is not None and args.harness is None:
        raise LeanrigError("--harness-bin: whose program?", hint="add --harness claude-code|codex")
    report = run_cluster_doctor(
        args.ray,
        suite=Path(args.suite).absolute() if args.suite is not None else None,
        harness=args.harness,
        harness_bin=Path(args.harness_bin).absolute() if args.harness_bin is not None else None,
    )
    if args.json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo()


def _cmd_check(args: argparse.Namespace) -> int:
    import anyio

    from lsp_bridge import find_lean

    from ..tasks import library_dir, load_suite
    from ..verdict import Verifier

    suite = load_suite(Path(args.suite).absolute(), only=[args.task])
    task = suite.task(args.task)
    try:
        # Bytes, not universal newlines: a lone carriage return is an error to Lean.
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
        # Not `report/`: beside a run's ledger, that is the run's report.
        out = paths[0] / "report" if paths[0].is_dir() else paths[0].with_name("ledger-report")
    else:
        out = Path("report").absolute()
    for path in paths:
        if path.is_file() and (path.parent / "results.jsonl").exists():
            print(
                f"note: {path} belongs to the run {path.parent}: this report counts the "
                "check_proof calls in its ledger; `leanrig report "
                f"{path.parent}` reports the run's verdicts",
                file=sys.stderr,
            )
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
    print(
        f"wrote {out / 'compare.md'}, {out / 'compare.json'}"
        + "".join(f", {p}" for p in summary.get("plots", []))
    )
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
        return run_search_agent(
            mcp_config=a.mcp_config,
            task=a.task,
            max_candidates=a.max_candidates,
            limit=a.limit,
            check=a.check,
        )

    code: int = anyio.run(main)
    return code


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


def _task_ids(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise argparse.ArgumentTypeError(f"no task id in {text!r}")
    return ids


def _megabytes(text: str) -> int:
    """A memory size in MB: ``8G``, ``512M``, ``8192`` (MB)."""
    units = {"M": 1, "G": 1024, "T": 1024 * 1024}
    word = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(word[-1:])
    number = word[:-1] if scale is not None else word
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 8G, 512M)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1M")
    return int(value)


DESCRIPTION = """\
leanrig: a fast, scoped, timed and verified loop for proving in Lean 4 — warm Lean servers for
proof agents (MCP, JSON-RPC) and human provers (an LSP proxy), benchmark runs with an
independent sandboxed verdict after every attempt, and the reports behind the metrics."""
EPILOG = """\
start here:
  leanrig doctor                         which Lean, the sandbox, a smoke test
  leanrig demo                           an agent's proof loop on the demo suite
  leanrig run --suite DIR --agent CMD    an agent over a suite (docs/runs.md)
  leanrig report RUN_DIR                 the run's scores, time and cost
each command's options: leanrig COMMAND --help; docs/cli.md lists them all."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="leanrig",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Also after the subcommand (`leanrig serve … --log-level info`, as docs/cli.md lists it).
    common = argparse.ArgumentParser(add_help=False)
    for where, default in ((parser, "warning"), (common, argparse.SUPPRESS)):
        where.add_argument(
            "--log-level",
            default=default,
            choices=LOG_LEVELS,
            type=str.lower,
            help="structlog level (JSON on stderr)",
        )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    boot = command("bootstrap", help="build the zero-install Lean (idempotent)")
    boot.add_argument("--quiet", action="store_true")
    boot.set_defaults(func=_cmd_bootstrap)

    doctor = command(
        "doctor",
        help="which Lean, its mode, sandbox tools, smoke test; with "
        "--ray: every node of a Ray cluster",
    )
    doctor.add_argument("--json", action="store_true")
    doctor.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="check every alive node of the Ray "
        "cluster at ADDRESS (or auto) for `leanrig run --ray` "
        "(docs/scale-out.md)",
    )
    doctor.add_argument(
        "--suite",
        metavar="DIR",
        help="with --ray: the suite the run will use "
        "(same path and content on every node, or a prelude suite shipped with "
        "the run)",
    )
    doctor.add_argument(
        "--harness",
        choices=["claude-code", "codex"],
        help="with --ray: the harness the run will use (same version on every node)",
    )
    doctor.add_argument(
        "--harness-bin",
        metavar="PATH",
        help="with --harness: its program (default: PATH, `make harnesses`)",
    )
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
    serve.add_argument(
        "--max-processes", type=positive(int), help="Lean server processes in the pool"
    )
    serve.add_argument(
        "--step-timeout", type=positive(float), default=60.0, help="seconds per Lean wait"
    )
    serve.add_argument("--no-sandbox", action="store_true", help="run Lean without bwrap/rlimits")
    serve.add_argument("--task", help="serve only this task (one `leanrig run` attempt)")
    serve.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="the pool on a Ray cluster: ADDRESS or auto (needs leanrig[ray]; docs/scale-out.md)",
    )
    serve.add_argument(
        "--condition",
        choices=["baseline", "lad"],
        default="baseline",
        help="lad: also serve search_library/read_library over the suite's "
        "[lad] library (docs/agent-tools.md)",
    )
    serve.add_argument("--lad", action="store_true", help="the same as --condition lad")
    serve.set_defaults(func=cmd_serve)

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
        "paths",
        nargs="+",
        metavar="RUN_DIR_OR_LEDGER",
        help="run directories (leanrig run, leanrig lsp) or a ledger.jsonl; several: a leaderboard",
    )
    report.add_argument(
        "--out",
        help="output directory (default: RUN_DIR/report; for a ledger "
        "file, ledger-report/ beside it)",
    )
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
    who.add_argument(
        "--agent",
        help="agent command; {prompt} {task} {workspace} {mcp_config} {home} are replaced",
    )
    who.add_argument(
        "--harness",
        choices=["claude-code", "codex"],
        help="a published agent harness, set up per attempt",
    )
    run.add_argument("--condition", choices=["baseline", "lad"], help="default baseline")
    run.add_argument("--time-limit", type=float, help="seconds per invocation (default 1800)")
    run.add_argument(
        "--equiv-budget",
        type=positive(float),
        metavar="SECONDS",
        help="statement tasks: seconds per direction of the equivalence proof with the "
        "reference (default: the suite's [limits] equiv_seconds, 20)",
    )
    run.add_argument("--attempts", type=int, help="independent attempts per task (default 1)")
    run.add_argument("--parallel", type=int, help="attempts at once (default 1)")
    run.add_argument("--out", help="run directory (default runs/run-<timestamp>)")
    run.add_argument("--label", help="the run's name in reports")
    run.add_argument("--model", help="model name (run.json, prices)")
    run.add_argument("--agent-tool", help="agent tool name (run.json)")
    run.add_argument("--prices", help="price schedule TOML (docs/runs.md)")
    run.add_argument(
        "--tasks",
        type=_task_ids,
        action="extend",
        metavar="ID[,ID…]",
        help="run only these tasks (default: every task of the suite)",
    )
    run.add_argument("--resume", action="store_true", help="continue an interrupted run")
    networks = ["none", "model", "all"]
    run.add_argument(
        "--agent-network",
        nargs="?",
        const="all",
        choices=networks,
        help="what the agent reaches: none, its model through the run's gateway "
        "(default with --harness or --model-endpoint), or all (bare)",
    )
    run.add_argument(
        "--agent-home",
        metavar="DIR",
        help="copied into each attempt's fresh home, the agent's HOME ({home}; "
        "default: empty; the user's home is read-only to agents)",
    )
    run.add_argument(
        "--harness-bin",
        metavar="PATH",
        help="the harness's program (default: PATH, `make harnesses`)",
    )
    run.add_argument(
        "--reasoning",
        metavar="LEVEL",
        help="the harness's reasoning effort (Claude Code --effort, Codex model_reasoning_effort)",
    )
    run.add_argument(
        "--model-endpoint",
        metavar="URL",
        help="where the run's model gateway forwards model calls (default with "
        "--harness: the vendor's API)",
    )
    run.add_argument(
        "--model-key-env",
        metavar="NAME",
        help="the environment variable holding the model's API key (default: "
        "ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN, OPENAI_API_KEY)",
    )
    run.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="place each attempt on a node of a Ray cluster: ADDRESS or auto "
        "(needs leanrig[ray]; docs/scale-out.md)",
    )
    run.add_argument(
        "--attempt-memory",
        metavar="SIZE",
        type=_megabytes,
        help="what an attempt reserves on a cluster node (e.g. 8G, 512M; "
        "default: the suite's [limits])",
    )
    run.add_argument(
        "--record-model-io",
        action="store_true",
        default=None,
        help="keep each model call's request and answer in the attempt's "
        "model_io.jsonl (default with --model replay; no key or header is "
        "written)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.set_defaults(func=cmd_run)

    model = command("model", help="the replay model: a local model endpoint for offline runs")
    model_kinds = model.add_subparsers(dest="model_command", required=True)
    replay = model_kinds.add_parser(
        "serve",
        help="replay a plan of tool calls as a model (Anthropic Messages, OpenAI "
        "Responses and Chat Completions)",
    )
    replay.add_argument("--plan", required=True, help="the plan (docs/agents.md)")
    replay.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    replay.add_argument(
        "--port", type=int, default=0, help="default 0: a free port, said on stderr"
    )
    replay.add_argument("--log", help="one JSON line per call served (tokens as served)")
    replay.set_defaults(func=cmd_model)
    add_plan_from_command(model_kinds)

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

    add_suite_command(sub, common)
    add_equiv_command(sub, common)
    add_export_command(sub, common)

    # Only `edit` and `lsp` import the editor layer; its own parser reads their arguments.
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
        sys.stdout.flush()  # a reader that went is found here, not at exit
    except LeanrigError as exc:
        print(f"leanrig: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `leanrig report RUN | head`: no traceback, and no second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE
    except BaseExceptionGroup as group:
        refused, other = group.split(LeanrigError)
        if refused is None or other is not None:
            raise
        for error in error_leaves(refused):
            print(f"leanrig: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
