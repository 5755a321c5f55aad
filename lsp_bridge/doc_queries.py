"""LSP queries about one version of a document, sent with its change (``LeanClient.update``).

Must not send anything or hold state: the client frames the queries into its exchange."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from lsprotocol.converters import get_converter

from .lean_types import LspRange, PlainGoal, PlainTermGoal
from .positions import LspPos

_converter = get_converter()


def parse_symbols(result: Any, from_line: int = 0) -> list[lsp.DocumentSymbol]:
    """Lean's document symbols; with ``from_line``, only those ending on or after that line."""
    if from_line <= 0:
        return [_converter.structure(s, lsp.DocumentSymbol) for s in result or ()]
    return [_converter.structure(s, lsp.DocumentSymbol) for s in _ending_from(result, from_line)]


def _ending_from(symbols: Any, line: int) -> list[dict[str, Any]]:
    kept = []
    for s in symbols or ():
        if s["range"]["end"]["line"] >= line:
            children = s.get("children")
            kept.append({**s, "children": _ending_from(children, line)} if children else s)
    return kept


def parse_hover(result: Any) -> lsp.Hover | None:
    return None if result is None else _converter.structure(result, lsp.Hover)


@dataclass(frozen=True, slots=True)
class DocQuery:
    """A request about a document's version, asked with the change, and how to read its answer."""

    method: str
    parse: Callable[[Any], Any]
    position: LspPos | None = None
    optional: bool = False  # its error is returned in place of its answer, not raised
    unless_clean: bool = False  # answered only about a version that is not clean (else None)
    extra: Mapping[str, Any] | None = None  # params beside the document and position
    item: Any = None  # params instead of them (the item a resolve request resolves)

    def made_optional(self) -> DocQuery:
        return dataclasses.replace(self, optional=True)

    def made_unless_clean(self) -> DocQuery:
        return dataclasses.replace(self, unless_clean=True)

    def params(self, uri: str) -> dict[str, Any]:
        if self.item is not None:
            return self.item  # type: ignore[no-any-return]
        params: dict[str, Any] = {"textDocument": {"uri": uri}}
        if self.position is not None:
            params["position"] = self.position.to_json()
        if self.extra is not None:
            params.update(self.extra)
        return params

    @staticmethod
    def symbols(from_line: int = 0) -> DocQuery:
        if from_line <= 0:
            return DocQuery("textDocument/documentSymbol", parse_symbols)
        return DocQuery(
            "textDocument/documentSymbol", functools.partial(parse_symbols, from_line=from_line)
        )

    @staticmethod
    def plain_goal(pos: LspPos) -> DocQuery:
        return DocQuery("$/lean/plainGoal", PlainGoal.from_json, pos)

    @staticmethod
    def plain_term_goal(pos: LspPos) -> DocQuery:
        return DocQuery("$/lean/plainTermGoal", PlainTermGoal.from_json, pos)

    @staticmethod
    def hover(pos: LspPos) -> DocQuery:
        return DocQuery("textDocument/hover", parse_hover, pos)

    @staticmethod
    def definition(pos: LspPos) -> DocQuery:
        """Where the constant at ``pos`` is declared: Lean's location links (raw JSON)."""
        return DocQuery("textDocument/definition", _as_list, pos)

    @staticmethod
    def completion(pos: LspPos) -> DocQuery:
        """Lean's completion items at ``pos`` (raw JSON: ``data`` must go back unchanged)."""
        return DocQuery("textDocument/completion", _completion_items, pos)

    @staticmethod
    def code_actions(at: LspRange, diagnostics: Sequence[Any] = ()) -> DocQuery:
        """Lean's code actions for ``at`` (raw JSON; those with ``data`` resolve lazily)."""
        extra = {"range": at.to_json(), "context": {"diagnostics": list(diagnostics)}}
        return DocQuery("textDocument/codeAction", _as_list, extra=extra)

    @staticmethod
    def resolve(method: str, item: Any) -> DocQuery:
        """``completionItem/resolve`` or ``codeAction/resolve`` of one item Lean gave."""
        return DocQuery(method, _as_dict, item=item)


def _as_list(result: Any) -> list[Any]:
    return list(result) if isinstance(result, list) else []


def _as_dict(result: Any) -> dict[str, Any]:
    return dict(result) if isinstance(result, dict) else {}


def _completion_items(result: Any) -> list[Any]:
    if isinstance(result, dict):
        return _as_list(result.get("items"))
    return _as_list(result)


def framed_requests(
    uri: str, queries: Sequence[DocQuery]
) -> list[tuple[str, Any, Callable[[Any], Any] | None]]:
    """``queries`` about ``uri`` as ``LspTransport.exchange`` takes its requests."""
    return [(q.method, q.params(uri), q.parse) for q in queries]
