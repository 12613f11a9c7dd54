"""One style of log event across src/eipctl, so a log line can be found by its name.

Events are `noun.verb` (dotted, each part snake_case: `address.added`, `leader.lost`), a
string literal at the call (an f-string or a variable can't be grepped for), and fields use
one key per meaning: `link` (not ifname), `error` (not err/exc), no msg/message (the event
*is* the message; free text goes in `detail`). Read from the source with `ast`, so every
call is checked, including those no test runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "eipctl"
LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "msg"}
LOGGERS = {"log", "logger", "_log"}
EVENT = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
BANNED_KEYS = {
    "ifname": "link",
    "err": "error",
    "exc": "error",
    "msg": "detail",
    "message": "detail",
}


def log_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
            if node.func.attr in LEVELS and name in LOGGERS and node.args:
                calls.append((f"{path.relative_to(SRC)}:{node.lineno}", node))
    return calls


def test_the_scan_sees_the_log_calls() -> None:
    assert len(log_calls()) > 100  # guards the scan itself: a broken filter finds nothing


def test_every_event_is_a_dotted_literal() -> None:
    wrong = []
    for where, call in log_calls():
        event = call.args[0]
        if not (isinstance(event, ast.Constant) and isinstance(event.value, str)):
            wrong.append(f"{where}: not a string literal: {ast.unparse(event)}")
        elif not EVENT.match(event.value):
            wrong.append(f"{where}: {event.value!r} is not noun.verb")
    assert wrong == []


def test_field_keys_have_one_spelling() -> None:
    wrong = [
        f"{where}: {kw.arg}= (use {BANNED_KEYS[kw.arg]}=)"
        for where, call in log_calls()
        for kw in call.keywords
        if kw.arg in BANNED_KEYS
    ]
    assert wrong == []
