"""Flag specifications and their resolution: flag > environment > config file > default.

Each subcommand declares only its own flags (with `setting()` on the settings dataclasses
in `runtime/config.py` and `nodeips/settings.py`); this module
turns a list of specs into argparse arguments and resolves every value through the same
parser, whatever its source, so an error always names the flag and where the value came from.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eipctl.runtime.logsetup import DroppingStream
from eipctl.runtime.values import parse_bool, parse_duration, positive_duration

ENV_PREFIX = "EIPCTL_"


class SettingsError(Exception):
    """A flag value that cannot be used; the message names the flag and the value's source."""


@dataclass(frozen=True)
class Deprecation:
    """A value given under a flag's old name (`FlagSpec.renamed_to`), to be logged once the
    process logs (`runtime.runner.run_process`)."""

    flag: str
    replacement: str
    source: str
    applied: bool
    """False: the new name was set as firmly (same or higher precedence) and won."""

    @property
    def text(self) -> str:
        outcome = (
            f"its value is used as --{self.replacement}"
            if self.applied
            else f"ignored: --{self.replacement} is set too and wins"
        )
        return (
            f"--{self.flag} (from {self.source}) is deprecated and will be removed: {outcome}; "
            f"use --{self.replacement} (docs/operations.md, 'Renamed flags')"
        )


@dataclass(frozen=True)
class FlagSpec:
    """One command-line flag: `--name`, also `EIPCTL_NAME` and `name:` in the config file."""

    name: str
    parse: Callable[[str], Any]
    default: str | None
    help: str
    metavar: str | None = None
    shown: str = ""
    """The default as ``--help`` says it, when it is worked out at start (the pod name...)."""
    renamed_to: str = ""
    """This is the old name of flag ``renamed_to``: still read, with a deprecation warning
    (`Deprecation`), and its value goes to the new flag unless that was set as firmly."""

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.name.upper().replace("-", "_")


def add_flags(parser: argparse.ArgumentParser, specs: Sequence[FlagSpec]) -> None:
    """Register specs on a parser; values stay raw strings until `resolve`."""
    for spec in specs:
        shown = spec.shown or ("unset" if spec.default is None else repr(spec.default))
        extra: dict[str, Any] = {}
        if spec.parse is parse_bool:  # `--rebalance` alone means true; `--rebalance=false` works
            extra = {"nargs": "?", "const": "true", "metavar": "BOOL"}
        else:
            extra = {"metavar": spec.metavar or _metavar(spec)}
        parser.add_argument(
            f"--{spec.name}",
            dest=spec.dest,
            default=None,
            help=f"{spec.help} (default: {shown}; env {spec.env_var})",
            **extra,
        )


def _metavar(spec: FlagSpec) -> str:
    if spec.parse in (parse_duration, positive_duration):
        return "DURATION"
    return spec.dest.upper()


def load_config_file(
    path: str | None,
    section: str,
    known: Mapping[str, Collection[str]] | None = None,
    origin: str = "",
) -> dict[str, Any]:
    """Read the YAML config: top-level keys apply to every command, a `section:` map overrides.

    `known` maps each command (a section name) to the keys it reads. With it, a key no command
    reads, or a key in a section that its command does not read, is refused: a misspelt key
    silently ignored leaves a default in place that the operator thinks they changed. The
    whole file is checked, so every process sharing it rejects it alike.
    """
    if not path:
        return {}
    where = f" (from {origin})" if origin else ""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise SettingsError(f"--config: cannot read {path}: {exc.strerror}{where}") from exc
    except yaml.YAMLError as exc:
        raise SettingsError(f"--config: {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SettingsError(f"--config: {path} must hold a mapping of flag names to values")
    if known is None:
        sections = {k for k, v in data.items() if isinstance(v, dict)}
    else:
        sections = set(known)
        if (problem := _config_problem(data, known)) is not None:
            raise SettingsError(f"--config: {path}: {problem}")
    merged = {k: v for k, v in data.items() if k not in sections}
    own = data.get(section)
    if isinstance(own, dict):
        merged.update(own)
    return merged


def _config_problem(data: Mapping[Any, Any], known: Mapping[str, Collection[str]]) -> str | None:
    """The first key of `data` that no command would read, described; None if all are read."""
    anywhere = {key for keys in known.values() for key in keys}
    for key, value in data.items():
        name = str(key)
        if name in known:
            if value is None:  # `scheduler:` with every line under it commented out
                continue
            if not isinstance(value, dict):
                return f"section {name!r} must be a mapping of flag names to values"
            for inner in map(str, value):
                if inner not in known[name]:
                    return f"unknown key {inner!r} in section {name!r}" + _hint(inner, known[name])
        elif name not in anywhere:
            return f"unknown key {name!r}" + _hint(name, [*known, *anywhere])
    return None


def _hint(key: str, candidates: Collection[str]) -> str:
    dashed = sorted(c for c in candidates if "_" not in c)  # `node_timeout` works; not shown
    close = difflib.get_close_matches(key, dashed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def usage_error(command: str, message: str) -> int:
    """`eipctl COMMAND: error: MESSAGE` on stderr (if it can be written); the exit status, 2."""
    stderr = DroppingStream(sys.stderr)
    stderr.write(f"eipctl {command}: error: {message}\n")
    stderr.flush()
    return 2


def resolve(
    specs: Sequence[FlagSpec],
    args: argparse.Namespace,
    environ: Mapping[str, str],
    file_values: Mapping[str, Any],
    deprecations: list[Deprecation] | None = None,
) -> dict[str, Any]:
    """Parsed value for each spec, by precedence flag > env > file > default.

    A flag's old name (`FlagSpec.renamed_to`) given at a higher precedence than its new name
    sets the new one; each use of an old name is added to ``deprecations``.
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in specs:
        raw, source = _pick(spec, args, environ, file_values)
        sources[spec.name] = source
        if raw is None:
            values[spec.dest] = None
            continue
        try:
            values[spec.dest] = spec.parse(str(raw).lower() if isinstance(raw, bool) else raw)
        except ValueError as exc:
            raise SettingsError(f"--{spec.name}: {exc} (from {source})") from exc
    by_name = {spec.name: spec for spec in specs}
    for old in specs:
        if not old.renamed_to or sources[old.name] == DEFAULT_SOURCE:
            continue
        new = by_name[old.renamed_to]
        applied = _rank(sources[old.name]) < _rank(sources[new.name])
        if applied:
            values[new.dest] = values[old.dest]
        if deprecations is not None:
            deprecations.append(Deprecation(old.name, new.name, sources[old.name], applied))
    return values


DEFAULT_SOURCE = "default"
_RANKS = ("command line", "environment", "config file", DEFAULT_SOURCE)


def _rank(source: str) -> int:
    """Precedence of a value's source (`_pick`): 0 for the command line, then env, file."""
    return next(i for i, prefix in enumerate(_RANKS) if source.startswith(prefix))


def _pick(
    spec: FlagSpec,
    args: argparse.Namespace,
    environ: Mapping[str, str],
    file_values: Mapping[str, Any],
) -> tuple[Any, str]:
    flag_value = getattr(args, spec.dest, None)
    if flag_value is not None:
        return flag_value, "command line"
    if spec.env_var in environ:
        return environ[spec.env_var], f"environment {spec.env_var}"
    for key in (spec.name, spec.dest):
        if file_values.get(key) is not None:  # `key:` with no value leaves the default
            return file_values[key], f"config file key {key!r}"
    return spec.default, DEFAULT_SOURCE


def environment() -> Mapping[str, str]:
    return os.environ


_FLAG_KEY = "eipctl_flag"


def setting(
    default: str | None,
    parse: Callable[[str], Any],
    help: str,
    *,
    shown: str = "",
    renamed_to: str = "",
) -> Any:
    """A dataclass field that is also a flag: `default` is the flag's text, parsed once here.

    ``shown``: how ``--help`` states a default worked out at start (else the value itself).

    ``renamed_to``: this field is the deprecated old name of that flag (dashed); leave its
    default None and read the new field only (`resolve` carries the value over).
    """
    value = None if default is None else parse(default)
    return dataclasses.field(
        default=value, metadata={_FLAG_KEY: (default, parse, help, shown, renamed_to)}
    )


def flag_specs(cls: type) -> list[FlagSpec]:
    """The flags a settings dataclass declares, in field order."""
    specs = []
    for f in dataclasses.fields(cls):
        default, parse, help_text, shown, renamed_to = f.metadata[_FLAG_KEY]
        name = f.name.replace("_", "-")
        specs.append(FlagSpec(name, parse, default, help_text, shown=shown, renamed_to=renamed_to))
    return specs
