"""Evaluating one CEL expression for the CRD rules (cel_rules.py walks the schema): cel-python
with the Kubernetes IP/CIDR library (cel_net.py), or, without cel-python (a test extra),
``self == oldSelf`` alone."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol, cast

import structlog

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
ABSENT: Any = object()
"""No old value to compare with (a create, or a value with no old counterpart)."""


def is_immutability(text: str) -> bool:
    """Whether a rule is ``self == oldSelf`` (whitespace aside)."""
    return "".join(text.split()) == "self==oldSelf"


class RuleError(Exception):
    """A rule that did not compile, or did not evaluate."""


class Evaluator(Protocol):
    def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
        """The rule's verdict; raises RuleError."""
        ...

    def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
        """A messageExpression's string, or None when it is not one."""
        ...


class _CelEvaluator:
    """cel-python with the Kubernetes IP/CIDR library; programs cached by expression."""

    def __init__(self) -> None:
        import celpy
        from celpy import celtypes
        from celpy.celparser import CELParseError
        from celpy.evaluation import CELEvalError

        from . import cel_net

        self._parse_error = CELParseError
        self._eval_error = CELEvalError
        self._types = celtypes
        self._net = cel_net
        self._env = celpy.Environment()
        self._programs: dict[str, Any] = {}

    def _program(self, expression: str) -> Any:
        prog = self._programs.get(expression)
        if prog is None:
            try:
                ast = self._env.compile(expression)
            except self._parse_error as exc:
                raise RuleError(f"rule compile error: {exc}") from exc
            prog = self._env.program(ast, functions=cast(Any, self._net.FUNCTIONS))
            self._programs[expression] = prog
        return prog

    def _evaluate(self, expression: str, self_value: Any, old_value: Any) -> Any:
        activation: dict[str, Any] = {**self._net.VARIABLES, "self": _to_cel(self_value)}
        if old_value is not ABSENT:
            activation["oldSelf"] = _to_cel(old_value)
        try:
            return self._program(expression).evaluate(activation)
        except self._eval_error as exc:
            raise RuleError(str(exc.args[0] if exc.args else exc)) from exc

    def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
        result = self._evaluate(expression, self_value, old_value)
        if not isinstance(result, self._types.BoolType):
            raise RuleError(f"rule evaluated to {type(result).__name__}, not bool")
        return bool(result)

    def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
        try:
            result = self._evaluate(expression, self_value, old_value)
        except RuleError:
            return None
        return str(result) if isinstance(result, str) else None


class ImmutableOnly:
    """Without cel-python: ``self == oldSelf`` only."""

    def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
        if is_immutability(expression):
            return bool(self_value == old_value)
        return True

    def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
        return None


@lru_cache(maxsize=1)
def evaluator() -> Evaluator:
    try:
        return _CelEvaluator()
    except ImportError:
        log.warning(
            "cel.unavailable",
            detail="cel-python is not installed: CRD x-kubernetes-validations other than "
            "self == oldSelf are not checked",
        )
        return ImmutableOnly()


def _to_cel(value: Any) -> Any:
    from celpy.adapter import json_to_cel

    return json_to_cel(value)


def typed(schema: Obj, value: Any) -> Any:
    """A JSON value as its schema types it for CEL (date-times, numbers)."""
    if isinstance(value, dict):
        props: Obj = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return {
            k: typed(props.get(k) or (extra if isinstance(extra, dict) else {}), v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = schema.get("items")
        return [typed(items if isinstance(items, dict) else {}, v) for v in value]
    if isinstance(value, str) and schema.get("format") == "date-time":
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, int) and not isinstance(value, bool) and schema.get("type") == "number":
        return float(value)
    return value
