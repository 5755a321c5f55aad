"""``--prices FILE`` (TOML, docs/runs.md): token counts as list-price-equivalent USD.

An observed ``cost_usd`` wins; an unpriced model or a missing count is N/A (``None``), never 0."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lsp_bridge import LeanrigError

PER = 1_000_000


class PricesError(LeanrigError):
    hint = 'a prices TOML: `fixed = YYYY-MM-DD` and [models."NAME"] input / output (USD per 1M)'


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0, description="USD per million uncached input tokens")
    cached_input: float | None = Field(default=None, ge=0, description="default: the input price")
    output: float = Field(ge=0, description="USD per million output tokens")


class PriceSchedule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    fixed: date = Field(description="the date the schedule was fixed")
    source: str = ""
    models: dict[str, ModelPrice] = Field(default_factory=dict)

    def price(self, model: str | None) -> ModelPrice | None:
        return self.models.get(model) if model is not None else None


def load_prices(path: Path) -> PriceSchedule:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PricesError(f"no such prices file: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PricesError(f"{path} is not valid TOML: {exc}") from None
    try:
        return PriceSchedule.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise PricesError(f"{path}: {where}: {err['msg']}") from None


CostSource = Literal["observed", "list_price"]


@dataclass(frozen=True, slots=True)
class Cost:
    """A reconstructed cost: ``usd is None`` means N/A (then ``source`` is None too)."""

    usd: float | None
    source: CostSource | None

    @property
    def known(self) -> bool:
        return self.usd is not None


NA = Cost(None, None)


def token_cost(
    price: ModelPrice | None,
    input_tokens: int | None,
    cached_input_tokens: int | None,
    output_tokens: int | None,
) -> float | None:
    """USD at list price, or None when the model has no price or a needed count is unknown."""
    if price is None or input_tokens is None or output_tokens is None:
        return None
    cached = min(cached_input_tokens or 0, input_tokens)
    cached_rate = price.input if price.cached_input is None else price.cached_input
    return (
        (input_tokens - cached) * price.input + cached * cached_rate + output_tokens * price.output
    ) / PER


def attempt_cost(
    *,
    cost_usd: float | None,
    model: str | None,
    input_tokens: int | None,
    cached_input_tokens: int | None,
    output_tokens: int | None,
    prices: PriceSchedule | None,
) -> Cost:
    """Observed cost first; else tokens × the model's list prices; else N/A."""
    if cost_usd is not None:
        return Cost(cost_usd, "observed")
    if prices is None:
        return NA
    usd = token_cost(prices.price(model), input_tokens, cached_input_tokens, output_tokens)
    return NA if usd is None else Cost(usd, "list_price")


def fmt_usd(value: float | None) -> str:
    """Dollars with at least cents, three significant digits under a dollar, never an exponent."""
    if value is None:
        return "N/A"
    if value == 0 or not math.isfinite(value):
        return f"${value:.2f}"
    digits = max(2, 2 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{digits}f}"
    if digits > 2:
        whole, _, decimals = text.partition(".")
        text = f"{whole}.{decimals.rstrip('0').ljust(2, '0')}"
    return f"-${text[1:]}" if text.startswith("-") else f"${text}"
