"""models: the model side of a run: the metering gateway, and the replay model for offline runs.

Names load on first use (PEP 562): the runner must not import uvicorn or the replay model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .gateway import CallKind as CallKind
    from .gateway import ModelCall as ModelCall
    from .gateway import ModelGateway as ModelGateway
    from .gateway import count_kinds as count_kinds
    from .gateway import gateway_client as gateway_client
    from .gateway import model_time as model_time
    from .gateway import upstream_url as upstream_url
    from .model_io import MODEL_IO_FILE as MODEL_IO_FILE
    from .model_io import MODEL_IO_SCHEMA as MODEL_IO_SCHEMA
    from .model_io import reassemble as reassemble
    from .model_request import Api as Api
    from .model_request import RequestFacts as RequestFacts
    from .model_request import api_of as api_of
    from .model_request import request_facts as request_facts
    from .plan_from import PlanFromError as PlanFromError
    from .plan_from import RecordedPlan as RecordedPlan
    from .plan_from import plan_from_attempt as plan_from_attempt
    from .replay import ReplayPortUnavailable as ReplayPortUnavailable
    from .replay import replay_app as replay_app
    from .replay import serve_replay_model as serve_replay_model
    from .replay_plan import ReplayPlan as ReplayPlan
    from .replay_plan import ReplayPlanInvalid as ReplayPlanInvalid
    from .replay_plan import fill_placeholders as fill_placeholders
    from .replay_plan import load_plan as load_plan
    from .usage import CallUsage as CallUsage
    from .usage import WireMeter as WireMeter

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
