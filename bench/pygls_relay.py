"""Should `leanrig lsp`'s editor-facing server be a pygls server? What relaying a message costs
each way, per message, and what pygls's typed round trip keeps of Lean's messages.

The proxy (agent_tools/editor/proxy.py) decodes each body once with orjson to route it and
forwards the original bytes; a pygls 2.x ``LanguageServer`` parses every message it reads into
lsprotocol types (``json.loads(body, object_hook=protocol.structure_message)``, pygls/io_.py) and
writes every message back with ``json.dumps(data, default=...)`` and the converter's unstructure
(``JsonRPCProtocol._send_data``). The framing is the same for both, so it is left out; what
differs is timed, interleaved message by message. Medians and p95 in µs.

    python -m bench pygls_relay      (in `make bench`; --quick: a few repetitions)
"""

from __future__ import annotations

import enum
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from lsp_bridge import decode_body

from .common import print_table, summarize, write_result


def frame(body: bytes) -> bytes:
    """A frame as the editor proxy writes one: the header, then the body untouched."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


URI = "file:///work/suite/Suite/Task.lean"
LEANRIG, PYGLS = "leanrig (orjson decode + original bytes)", "pygls (typed parse + re-serialize)"
KEYSTROKE = (
    "didChange (incremental)",
    "$/lean/fileProgress",
    "publishDiagnostics (1)",
    "hover request",
    "hover response",
)


# --- the messages, as VS Code (editor side) and Lean 4 (sorted keys) write them -------------


def _pos(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


def _range(line: int, start: int, end_line: int, end: int) -> dict[str, Any]:
    return {"start": _pos(line, start), "end": _pos(end_line, end)}


def lean_file(lines: int = 300) -> str:
    """A Lean file of ``lines`` lines: namespaces of small theorems with tactic proofs."""
    out = ["import Mathlib.Tactic", "", "open Nat", ""]
    n = 0
    while len(out) < lines:
        out += [f"namespace Part{n}", ""]
        for k in range(6):
            out += [
                f"/-- The {k}-th fact of part {n}: addition with a constant. -/",
                f"theorem add_const_{n}_{k} (a b : ℕ) (h : a ≤ b) : a + {k} ≤ b + {k} := by",
                "  have h₁ : ∀ c : ℕ, a + c ≤ b + c := fun c => Nat.add_le_add_right h c",
                f"  exact h₁ {k}",
                "",
            ]
        out += [f"end Part{n}", ""]
        n += 1
    return "\n".join(out[:lines]) + "\n"


INSERTED = (
    "  have h₂ : ∀ n : ℕ, n + 0 = n := by\n    intro n\n    simp [Nat.add_zero]\n"
    "  have h₃ : a + 0 ≤ b + 0 := by simpa [h₂] using h\n  omega -- ⊢ a + k ≤ b + k\n"
)


def _editor(message: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **message})


def _lean(message: dict[str, Any]) -> bytes:
    # Lean's Json objects are ordered maps: keys come sorted, non-ASCII raw (UTF-8).
    return orjson.dumps({"jsonrpc": "2.0", **message}, option=orjson.OPT_SORT_KEYS)


def _diagnostic(i: int) -> dict[str, Any]:
    line = 40 + 3 * i
    rng = _range(line, 2, line, 30)
    kind = i % 3
    if kind == 0:  # an error with Lean's goal tag
        return {
            "fullRange": _range(line, 2, line + 2, 12),
            "leanTags": [1],
            "message": f"unsolved goals\na b : ℕ\nh : a ≤ b\n⊢ a + {i} ≤ b + {i}",
            "range": rng,
            "severity": 1,
            "source": "Lean 4",
        }
    if kind == 1:  # a linter warning: LSP's own `tags`
        return {
            "fullRange": rng,
            "message": f"unused variable `h{i}`\n\nnote: this linter can be disabled with "
            "`set_option linter.unusedVariables false`",
            "range": rng,
            "severity": 2,
            "source": "Lean 4",
            "tags": [1],
        }
    return {
        "fullRange": _range(line, 0, line + 4, 0),
        "message": "declaration uses 'sorry'",
        "range": rng,
        "severity": 2,
        "source": "Lean 4",
    }


def _symbol(name: str, kind: int, line: int, lines: int = 4) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": name,
        "range": _range(line, 0, line + lines, 0),
        "selectionRange": _range(line, 8, line, 8 + len(name)),
    }


def _completion_item(i: int) -> dict[str, Any]:
    name = f"add_le_add_{i}"
    return {
        "data": {
            "id": {"const": {"declName": f"Nat.{name}"}},
            "params": {"position": _pos(43, 14), "textDocument": {"uri": URI}},
        },
        "detail": "∀ {n m : ℕ} (k : ℕ), n ≤ m → n + k ≤ m + k",
        "kind": 3 if i % 4 else 21,
        "label": name,
        "sortText": f"{i:04d}",
    }


HOVER = (
    "```lean\nNat.add_le_add_right {n m : ℕ} (h : n ≤ m) (k : ℕ) : n + k ≤ m + k\n```\n***\n"
    "Adding the same number on the right keeps `≤`.\n***\n*import Init.Data.Nat.Basic*"
)


def messages() -> dict[str, tuple[bytes, str]]:
    """Each message's body and the method it answers (a response's type comes from its request,
    as pygls's ``send_request`` records it); ``""`` for the others."""
    symbols = [
        {
            **_symbol(f"Part{n}", 3, 4 + 32 * n, 31),
            "children": [_symbol(f"add_const_{n}_{k}", 12, 6 + 32 * n + 5 * k) for k in range(9)],
        }
        for n in range(5)
    ]
    return {
        "didChange (incremental)": (
            _editor(
                {
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": URI, "version": 17},
                        "contentChanges": [
                            {"range": _range(44, 0, 44, 0), "rangeLength": 0, "text": INSERTED}
                        ],
                    },
                }
            ),
            "",
        ),
        "didChange (full, 300 lines)": (
            _editor(
                {
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": URI, "version": 18},
                        "contentChanges": [{"text": lean_file()}],
                    },
                }
            ),
            "",
        ),
        "$/lean/fileProgress": (
            _lean(
                {
                    "method": "$/lean/fileProgress",
                    "params": {
                        "processing": [{"kind": 1, "range": _range(44, 0, 300, 0)}],
                        "textDocument": {"uri": URI, "version": 17},
                    },
                }
            ),
            "",
        ),
        "publishDiagnostics (1)": (
            _lean(
                {
                    "method": "textDocument/publishDiagnostics",
                    "params": {"diagnostics": [_diagnostic(0)], "uri": URI, "version": 17},
                }
            ),
            "",
        ),
        "publishDiagnostics (25)": (
            _lean(
                {
                    "method": "textDocument/publishDiagnostics",
                    "params": {
                        "diagnostics": [_diagnostic(i) for i in range(25)],
                        "uri": URI,
                        "version": 17,
                    },
                }
            ),
            "",
        ),
        "hover request": (
            _editor(
                {
                    "id": 42,
                    "method": "textDocument/hover",
                    "params": {"textDocument": {"uri": URI}, "position": _pos(43, 20)},
                }
            ),
            "",
        ),
        "hover response": (
            _lean(
                {
                    "id": 42,
                    "result": {
                        "contents": {"kind": "markdown", "value": HOVER},
                        "range": _range(43, 10, 43, 30),
                    },
                }
            ),
            "textDocument/hover",
        ),
        "documentSymbol response (50)": (
            _lean({"id": 43, "result": symbols}),
            "textDocument/documentSymbol",
        ),
        "completion response (200)": (
            _lean(
                {
                    "id": 44,
                    "result": {
                        "isIncomplete": True,
                        "items": [_completion_item(i) for i in range(200)],
                    },
                }
            ),
            "textDocument/completion",
        ),
    }


# --- the two paths ---------------------------------------------------------------------------


def leanrig_relay(body: bytes) -> bytes:
    """The proxy: one orjson decode to route the message, the original bytes forwarded."""
    decode_body(body)
    return frame(body)


Relay = Callable[[bytes], bytes]


class PyglsPath:
    """pygls's reading (io_.py) and writing (``_send_data``) of a message, through public
    pieces: the server's ``structure_message`` hook, lsprotocol's converter and its types."""

    def __init__(self) -> None:
        from lsprotocol.converters import get_converter
        from lsprotocol.types import METHOD_TO_TYPES
        from pygls.lsp.server import LanguageServer
        from pygls.protocol import JsonRPCProtocol

        self.server = LanguageServer("leanrig-bench", "0")
        # pygls's default_converter is this one plus structure hooks for its generic JsonRPC*
        # messages only: the same for the typed responses and for every unstructure.
        self.converter = get_converter()
        self.method_types = METHOD_TO_TYPES
        self.header = (
            "Content-Length: %d\r\n"
            f"Content-Type: {JsonRPCProtocol.CONTENT_TYPE}; charset={JsonRPCProtocol.CHARSET}"
            "\r\n\r\n"
        )
        self.charset = JsonRPCProtocol.CHARSET

    def _serialize(self, data: Any) -> Any:
        # JsonRPCProtocol._serialize_message
        if hasattr(data, "__attrs_attrs__"):
            return self.converter.unstructure(data)
        if isinstance(data, enum.Enum):
            return data.value
        return data.__dict__

    def hook(self, answers: str) -> Callable[[dict[str, Any]], Any]:
        """``structure_message``; for a response to ``answers``, the typed response it builds
        once ``send_request`` has recorded the request's result type (``_result_types``)."""
        structure_message: Callable[[dict[str, Any]], Any] = self.server.protocol.structure_message
        if not answers:
            return structure_message
        response_type = self.method_types[answers][1]
        assert response_type is not None, answers
        structure = self.converter.structure

        def typed_response(data: dict[str, Any]) -> Any:
            if "jsonrpc" in data and "id" in data and "method" not in data and "error" not in data:
                return structure(data, response_type)
            return structure_message(data)

        return typed_response

    def relay(self, answers: str) -> Relay:
        hook, serialize, header, charset = (
            self.hook(answers),
            self._serialize,
            self.header,
            self.charset,
        )

        def relay(body: bytes) -> bytes:
            message = json.loads(body, object_hook=hook)
            text = json.dumps(message, default=serialize)
            return (header % len(text) + text).encode(charset)

        return relay


# --- correctness: what the typed round trip keeps --------------------------------------------


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Where ``after`` differs from ``before``, list indices collapsed to ``[*]``, deduplicated."""
    out: list[str] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            if key not in after:
                out.append(f"{path}.{key} dropped")
            else:
                out += differences(value, after[key], f"{path}.{key}")
        out += [f"{path}.{key} added ({_short(after[key])})" for key in after if key not in before]
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for b, a in zip(before, after, strict=True):
            out += differences(b, a, f"{path}[*]")
    elif isinstance(before, dict) and isinstance(after, list):
        out.append(f"{path or '<message>'}: object written as an array (keys lost)")
    elif before != after or type(before) is not type(after):
        out.append(f"{path or '<message>'}: {_short(before)} -> {_short(after)}")
    return list(dict.fromkeys(out))


def round_trip(body: bytes, relay: Relay) -> tuple[list[str], int]:
    """What pygls's round trip changes in ``body``, and the size of the frame it writes."""
    try:
        written = relay(body)
    except Exception as exc:  # a message pygls cannot carry at all
        return [f"round trip fails: {type(exc).__name__}: {exc}"], 0
    text = written.partition(b"\r\n\r\n")[2]
    return differences(orjson.loads(body), json.loads(text)), len(written)


# --- the measurement ------------------------------------------------------------------------


BIG = (
    "didChange (full, 300 lines)",
    "publishDiagnostics (25)",
    "documentSymbol response (50)",
    "completion response (200)",
)


def measure(reps: int, big_reps: int) -> dict[str, Any]:
    """``reps`` relays of each small message and ``big_reps`` of each large one, each way,
    alternating which path goes first; the keystroke mix sums one repetition's messages."""
    try:
        pygls = PyglsPath()
    except ImportError:
        print("pygls is not installed (pip install pygls): nothing measured")
        return {}
    bodies = messages()
    paths: dict[str, tuple[Relay, Relay]] = {
        name: (leanrig_relay, pygls.relay(answers)) for name, (_, answers) in bodies.items()
    }
    samples: dict[str, dict[str, list[float]]] = {name: {LEANRIG: [], PYGLS: []} for name in bodies}
    clock = time.perf_counter_ns
    for name, (body, _) in bodies.items():  # warm both (cattrs builds its hooks lazily)
        for relay in paths[name]:
            relay(body)
    for rep in range(reps):
        for name, (body, _) in bodies.items():
            if name in BIG and rep >= big_reps:
                continue
            order = (LEANRIG, PYGLS) if rep % 2 == 0 else (PYGLS, LEANRIG)
            for label in order:
                relay = paths[name][0 if label == LEANRIG else 1]
                t = clock()
                relay(body)
                samples[name][label].append((clock() - t) / 1e6)

    results: dict[str, dict[str, dict[str, float]]] = {}
    ratios: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for name, rows in samples.items():
        results[name] = {label: summarize(v) for label, v in rows.items()}
        ratios[name] = round(
            results[name][PYGLS]["median_ms"] / results[name][LEANRIG]["median_ms"], 1
        )
        sizes[name] = len(bodies[name][0])
        print_table(f"{name} ({sizes[name]} B): one relayed message", results[name], LEANRIG)
    over_messages = round(statistics.median(ratios.values()), 1)
    keystroke = {
        label: summarize(
            [sum(v) for v in zip(*(samples[m][label] for m in KEYSTROKE), strict=True)]
        )
        for label in (LEANRIG, PYGLS)
    }
    ratios["per keystroke"] = round(
        keystroke[PYGLS]["median_ms"] / keystroke[LEANRIG]["median_ms"], 1
    )
    print_table("one keystroke: " + " + ".join(KEYSTROKE), keystroke, LEANRIG)

    print("\n## what pygls's typed round trip changes (JSON compared with the original)")
    kept: dict[str, list[str]] = {}
    written: dict[str, dict[str, int]] = {}
    checks = [(name, body, paths[name][1]) for name, (body, _) in bodies.items()]
    # A response to a request pygls did not send itself has no recorded result type.
    checks += [
        (f"{name}, untyped (request not sent by pygls)", body, pygls.relay(""))
        for name, (body, answers) in bodies.items()
        if answers
    ]
    for name, body, relay in checks:
        changes, size = round_trip(body, relay)
        kept[name] = changes
        written[name] = {"original_frame_bytes": len(frame(body)), "pygls_frame_bytes": size}
        print(f"{name}: {'unchanged' if not changes else ''}")
        for change in changes:
            print(f"    {change}")
    medians = {
        name: f"{1000 * r[LEANRIG]['median_ms']:.1f} vs {1000 * r[PYGLS]['median_ms']:.1f} µs"
        for name, r in {**results, "per keystroke": keystroke}.items()
    }
    lossy = sorted(name for name, changes in kept.items() if changes)
    notes = {
        "median leanrig vs pygls": medians,
        "messages pygls changes": lossy,
        "pygls total per keystroke / leanrig (median)": ratios["per keystroke"],
        "median ratio over the messages": over_messages,
        "why": "lsprotocol's types have no field for Lean's extras (Diagnostic.fullRange, "
        "leanTags): cattrs drops them; a method lsprotocol does not know ($/lean/...) or an "
        "untyped response gets namedtuples (a json round trip and a namedtuple class per "
        "object, hence its cost) that json.dumps writes as arrays",
    }
    return {
        "repetitions": {"small": reps, "large": big_reps},
        "message_bytes": sizes,
        "results": results,
        "per_keystroke": keystroke,
        "ratios": ratios,
        "round_trip_changes": kept,
        "frame_bytes": written,
        "notes": notes,
    }


def run(quick: bool = False) -> dict[str, Any]:
    result = measure(50, 10) if quick else measure(2000, 500)
    if result:
        write_result("pygls_relay", result)
    return result


if __name__ == "__main__":
    run()
