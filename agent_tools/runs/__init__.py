"""runs: `leanrig run`, the run directory's files, prices, the pure metrics, and the reports.

Names load on first use (PEP 562): a report must not import the runner's servers and MCP SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .agent_sandbox import probe_prefix as probe_prefix
    from .attempt_dir import SERVER_NAME as SERVER_NAME
    from .benchmark import run_benchmark as run_benchmark
    from .harness import HARNESSES as HARNESSES
    from .harness import HarnessError as HarnessError
    from .harness import HarnessName as HarnessName
    from .harness import find_harness as find_harness
    from .harness import harness_version as harness_version
    from .inspect_export import ExportedLog as ExportedLog
    from .inspect_export import InspectMissing as InspectMissing
    from .inspect_export import export_inspect as export_inspect
    from .ledger_report import ReportError as ReportError
    from .ledger_report import benchmark_metrics as benchmark_metrics
    from .ledger_report import percentile as percentile
    from .ledger_report import read_ledger as read_ledger
    from .ledger_report import summarize as summarize
    from .ledger_report import write_ledger_report as write_ledger_report
    from .loaded_run import load_run as load_run
    from .metrics import Change as Change
    from .metrics import Comparison as Comparison
    from .metrics import FieldDiff as FieldDiff
    from .metrics import RunMetrics as RunMetrics
    from .metrics import TaskOutcome as TaskOutcome
    from .metrics import compare as compare
    from .metrics import compute_metrics as compute_metrics
    from .metrics import pass_at_k as pass_at_k
    from .metrics import per_point as per_point
    from .metrics import relative_change as relative_change
    from .metrics import task_outcomes as task_outcomes
    from .metrics import weighted_score as weighted_score
    from .options import RunError as RunError
    from .options import RunOptions as RunOptions
    from .prices import Cost as Cost
    from .prices import ModelPrice as ModelPrice
    from .prices import PriceSchedule as PriceSchedule
    from .prices import PricesError as PricesError
    from .prices import attempt_cost as attempt_cost
    from .prices import load_prices as load_prices
    from .prices import token_cost as token_cost
    from .progress import RunSummary as RunSummary
    from .progress import summary_json as summary_json
    from .results import ATTEMPT_STATE as ATTEMPT_STATE
    from .results import RESULTS_FILE as RESULTS_FILE
    from .results import RESULTS_SCHEMA as RESULTS_SCHEMA
    from .results import RUN_FILE as RUN_FILE
    from .results import RUN_SCHEMA as RUN_SCHEMA
    from .results import USAGE_FILE as USAGE_FILE
    from .results import AttemptResult as AttemptResult
    from .results import ClusterInfo as ClusterInfo
    from .results import Condition as Condition
    from .results import Machine as Machine
    from .results import ResultsError as ResultsError
    from .results import ResultsRead as ResultsRead
    from .results import RunInfo as RunInfo
    from .results import TaskRef as TaskRef
    from .results import Usage as Usage
    from .results import append_result as append_result
    from .results import finished_attempts as finished_attempts
    from .results import parse_results as parse_results
    from .results import read_results as read_results
    from .results import read_run_info as read_run_info
    from .results import read_usage as read_usage
    from .results import time_limit_text as time_limit_text
    from .results import write_run_info as write_run_info
    from .run_report import compare_runs as compare_runs
    from .run_report import report_runs as report_runs
    from .run_report import write_report as write_report

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
