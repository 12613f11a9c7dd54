"""`eipctl` command line: one subcommand per process, each with only its own flags."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eipctl import __version__
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.plugin import main as plugin
from eipctl.runtime.config import (
    AllocatorSettings,
    ControllerSettings,
    SandboxSettings,
    SchedulerSettings,
)
from eipctl.runtime.settings import (
    Deprecation,
    FlagSpec,
    SettingsError,
    add_flags,
    environment,
    flag_specs,
    load_config_file,
    resolve,
    usage_error,
)
from eipctl.runtime.values import parse_bool


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    settings: type
    module: str  # "package.module:function" that runs it
    use_uvloop: bool


COMMANDS = (
    Command(
        "allocator",
        "hand out IPs from IpClaimPools to annotated Services (leader-elected)",
        AllocatorSettings,
        "eipctl.allocator.process:run",
        use_uvloop=True,
    ),
    Command(
        "scheduler",
        "place IpClaims on live IpNodes and move them off dead ones (leader-elected)",
        SchedulerSettings,
        "eipctl.scheduler.process:run",
        use_uvloop=True,
    ),
    Command(
        "controller",
        "hold this node's claims on its link, announce them, fence when cut off",
        ControllerSettings,
        "eipctl.controller.process:run",
        use_uvloop=False,  # pyroute2's async netlink fails under uvloop (pyroute2#1335)
    ),
    Command(
        "nodeips",
        "give every Node labelled eipctl.io/external-ip-auto-assign=true an IP of its own "
        "(leader-elected)",
        NodeIpsSettings,
        "eipctl.nodeips.process:run",
        use_uvloop=True,
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eipctl",
        description="External IPs for Kubernetes Services: allocated, placed, announced.",
    )
    parser.add_argument("--version", action="version", version=f"eipctl {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        add_flags(sub, flag_specs(command.settings))
    sandbox = subparsers.add_parser(
        "sandbox",
        help="run everything on this machine: API emulator, processes, simulated nodes",
        description="Run eipctl end to end on one machine. `eipctl sandbox kill-node NAME` and "
        "`eipctl sandbox revive-node NAME` act on a running sandbox from another terminal; "
        "`eipctl sandbox move-endpoint NAME` puts the pod of a Service with "
        "externalTrafficPolicy: Local on node NAME (its IP follows).",
    )
    sandbox.add_argument(
        "action",
        nargs="?",
        default="run",
        choices=("run", "kill-node", "revive-node", "move-endpoint", "status"),
    )
    sandbox.add_argument(
        "node", nargs="?", help="node name for kill-node / revive-node / move-endpoint"
    )
    add_flags(sandbox, flag_specs(SandboxSettings))
    plugin.add_commands(subparsers)  # status, why, nodes: the same as `kubectl eipctl`
    subparsers.add_parser("version", help="print the version")
    return parser


def config_keys() -> dict[str, set[str]]:
    """The keys each command reads from the config file: its flags, dashed or underscored."""
    return {
        c.name: {key for spec in flag_specs(c.settings) for key in (spec.name, spec.dest)}
        for c in COMMANDS
    }


def build_settings(
    settings_cls: type,
    args: argparse.Namespace,
    section: str,
    deprecations: list[Deprecation] | None = None,
) -> Any:
    """Settings from flags, env, config file and defaults; raises SettingsError.

    A flag given under its old name is added to ``deprecations`` (logged once logging is set).
    """
    specs = flag_specs(settings_cls)
    environ = environment()
    path, origin = _config_path(specs, args, environ)
    file_values = load_config_file(path, section, config_keys(), origin)
    values = resolve(specs, args, environ, file_values, deprecations)
    settings = settings_cls(**values)
    check: Callable[[], None] | None = getattr(settings, "check", None)
    if check is not None:
        try:
            check()
        except ValueError as exc:
            raise SettingsError(str(exc)) from exc
    return settings


def _config_path(
    specs: Sequence[FlagSpec], args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[str | None, str]:
    """The config file, like any flag: --config, else EIPCTL_CONFIG (commands that have it)."""
    flag_value: str | None = getattr(args, "config", None)
    if flag_value is not None:
        return flag_value, "command line"
    spec = next((s for s in specs if s.name == "config"), None)
    if spec is not None and spec.env_var in environ:
        return environ[spec.env_var], f"environment {spec.env_var}"
    return None, ""


def join_dash_values(argv: Sequence[str]) -> list[str]:
    """`--fence-timeout -1s` becomes `--fence-timeout=-1s`.

    argparse takes a value that starts with '-' (other than a plain number) for an option and
    stops at "expected one argument"; joined, the value reaches its parser, whose one-line
    error says what is wrong with it. A following `--flag` or `-h` is left alone.
    """
    args = list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    commands = {c.name: c.settings for c in COMMANDS} | {"sandbox": SandboxSettings}
    settings_cls = commands.get(command or "")
    specs = flag_specs(settings_cls) if settings_cls is not None else []
    takes_value = {f"--{s.name}" for s in specs if s.parse is not parse_bool}  # not --rebalance
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        value = args[i + 1] if i + 1 < len(args) else ""
        if (
            arg in takes_value
            and value[:1] == "-"
            and value[:2] != "--"
            and value not in ("-", "-h")
        ):
            out.append(f"{arg}={value}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(join_dash_values(sys.argv[1:] if argv is None else argv))
    if args.command == "version":
        sys.stdout.write(f"eipctl {__version__}\n")
        return 0
    if args.command in plugin.COMMANDS:
        return plugin.run(args, sys.stdout)
    deprecations: list[Deprecation] = []
    try:
        if args.command == "sandbox":
            settings = build_settings(SandboxSettings, args, "sandbox")
            return _run_sandbox(args, settings)
        command = next(c for c in COMMANDS if c.name == args.command)
        settings = build_settings(command.settings, args, command.name, deprecations)
    except SettingsError as exc:
        return usage_error(args.command, str(exc))
    from eipctl.runtime.runner import run_process

    module_name, _, func_name = command.module.partition(":")
    process_main = getattr(importlib.import_module(module_name), func_name)
    return run_process(
        command.name,
        settings,
        process_main,
        use_uvloop=command.use_uvloop,
        deprecations=deprecations,
    )


def _run_sandbox(args: argparse.Namespace, settings: SandboxSettings) -> int:
    try:
        from eipctl.sandbox import cli as sandbox_cli  # here: the processes never load it
    except ModuleNotFoundError as exc:
        if exc.name not in ("eipctl.sandbox", "kubemu"):
            raise
        return usage_error(
            "sandbox",
            "this eipctl was installed without the sandbox and the API emulator (the image "
            "leaves them out); run it from a checkout: pip install . && eipctl sandbox",
        )
    result: int = sandbox_cli.main(args.action, args.node, settings)
    return result
