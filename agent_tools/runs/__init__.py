"""runs: benchmark runs and their metrics — `leanrig run` (the run protocol: per-attempt
workspaces, agent invocations with a whole-tree kill, verdicts), the run directory's files
(run.json, results.jsonl, usage.json), price schedules, the pure metrics, and the reports of
ledgers, runs and baseline-vs-LAD comparisons. (The agents leanrig ships are in ../agents.)

Names load on first use (PEP 562): the report of a run must not import the runner's servers and
the MCP SDK (~1 s here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .attempt_dir import SERVER_NAME
    from .ledger_report import (
        ReportError,
        benchmark_metrics,
        percentile,
        read_ledger,
        summarize,
        write_ledger_report,
    )
    from .loaded_run import load_run
    from .metrics import (
        Change,
        Comparison,
        FieldDiff,
        RunMetrics,
        TaskOutcome,
        compare,
        compute_metrics,
        pass_at_k,
        per_point,
        relative_change,
        task_outcomes,
        weighted_score,
    )
    from .options import RunError, RunOptions
    from .prices import (
        Cost,
        ModelPrice,
        PriceSchedule,
        PricesError,
        attempt_cost,
        load_prices,
        token_cost,
    )
    from .progress import RunSummary, summary_json
    from .results import (
        ATTEMPT_STATE,
        RESULTS_FILE,
        RESULTS_SCHEMA,
        RUN_FILE,
        RUN_SCHEMA,
        USAGE_FILE,
        AttemptResult,
        Condition,
        Machine,
        ResultsError,
        ResultsRead,
        RunInfo,
        TaskRef,
        Usage,
        append_result,
        finished_attempts,
        parse_results,
        read_results,
        read_run_info,
        read_usage,
        time_limit_text,
        write_run_info,
    )
    from .run_report import compare_runs, report_runs, write_report
    from .runner import (
        run_benchmark,
    )

# name -> (submodule, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "ATTEMPT_STATE": ("results", "ATTEMPT_STATE"),
    "AttemptResult": ("results", "AttemptResult"),
    "Change": ("metrics", "Change"),
    "Comparison": ("metrics", "Comparison"),
    "Condition": ("results", "Condition"),
    "Cost": ("prices", "Cost"),
    "FieldDiff": ("metrics", "FieldDiff"),
    "Machine": ("results", "Machine"),
    "ModelPrice": ("prices", "ModelPrice"),
    "PriceSchedule": ("prices", "PriceSchedule"),
    "PricesError": ("prices", "PricesError"),
    "RESULTS_FILE": ("results", "RESULTS_FILE"),
    "RESULTS_SCHEMA": ("results", "RESULTS_SCHEMA"),
    "RUN_FILE": ("results", "RUN_FILE"),
    "RUN_SCHEMA": ("results", "RUN_SCHEMA"),
    "ReportError": ("ledger_report", "ReportError"),
    "ResultsError": ("results", "ResultsError"),
    "ResultsRead": ("results", "ResultsRead"),
    "RunError": ("options", "RunError"),
    "RunInfo": ("results", "RunInfo"),
    "RunMetrics": ("metrics", "RunMetrics"),
    "RunOptions": ("options", "RunOptions"),
    "RunSummary": ("progress", "RunSummary"),
    "TaskOutcome": ("metrics", "TaskOutcome"),
    "TaskRef": ("results", "TaskRef"),
    "SERVER_NAME": ("attempt_dir", "SERVER_NAME"),
    "USAGE_FILE": ("results", "USAGE_FILE"),
    "Usage": ("results", "Usage"),
    "append_result": ("results", "append_result"),
    "attempt_cost": ("prices", "attempt_cost"),
    "benchmark_metrics": ("ledger_report", "benchmark_metrics"),
    "compare": ("metrics", "compare"),
    "compare_runs": ("run_report", "compare_runs"),
    "compute_metrics": ("metrics", "compute_metrics"),
    "finished_attempts": ("results", "finished_attempts"),
    "load_prices": ("prices", "load_prices"),
    "load_run": ("loaded_run", "load_run"),
    "parse_results": ("results", "parse_results"),
    "pass_at_k": ("metrics", "pass_at_k"),
    "per_point": ("metrics", "per_point"),
    "percentile": ("ledger_report", "percentile"),
    "read_ledger": ("ledger_report", "read_ledger"),
    "read_results": ("results", "read_results"),
    "read_run_info": ("results", "read_run_info"),
    "read_usage": ("results", "read_usage"),
    "relative_change": ("metrics", "relative_change"),
    "report_runs": ("run_report", "report_runs"),
    "run_benchmark": ("runner", "run_benchmark"),
    "summarize": ("ledger_report", "summarize"),
    "summary_json": ("progress", "summary_json"),
    "task_outcomes": ("metrics", "task_outcomes"),
    "time_limit_text": ("results", "time_limit_text"),
    "token_cost": ("prices", "token_cost"),
    "weighted_score": ("metrics", "weighted_score"),
    "write_ledger_report": ("ledger_report", "write_ledger_report"),
    "write_report": ("run_report", "write_report"),
    "write_run_info": ("results", "write_run_info"),
}


__getattr__ = _lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "ATTEMPT_STATE",
    "RESULTS_FILE",
    "RESULTS_SCHEMA",
    "RUN_FILE",
    "RUN_SCHEMA",
    "SERVER_NAME",
    "USAGE_FILE",
    "AttemptResult",
    "Change",
    "Comparison",
    "Condition",
    "Cost",
    "FieldDiff",
    "Machine",
    "ModelPrice",
    "PriceSchedule",
    "PricesError",
    "ReportError",
    "ResultsError",
    "ResultsRead",
    "RunError",
    "RunInfo",
    "RunMetrics",
    "RunOptions",
    "RunSummary",
    "TaskOutcome",
    "TaskRef",
    "Usage",
    "append_result",
    "attempt_cost",
    "benchmark_metrics",
    "compare",
    "compare_runs",
    "compute_metrics",
    "finished_attempts",
    "load_prices",
    "load_run",
    "parse_results",
    "pass_at_k",
    "per_point",
    "percentile",
    "read_ledger",
    "read_results",
    "read_run_info",
    "read_usage",
    "relative_change",
    "report_runs",
    "run_benchmark",
    "summarize",
    "summary_json",
    "task_outcomes",
    "time_limit_text",
    "token_cost",
    "weighted_score",
    "write_ledger_report",
    "write_report",
    "write_run_info",
]
