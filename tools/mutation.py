"""Mutation testing of the guarded modules with mutmut 3, one area at a time.

    tox -e mutation                      # every area in turn
    tox -e mutation -- core writer       # only these areas
    tox -e mutation -- core.link_plan    # one module of an area
    tox -e mutation -- --list            # the areas, what they mutate and which tests run
    tox -e mutation -- --report core     # the last results again, without running
    tox -e mutation -- --guards core     # the guard operators instead (tools/guard_mutants.py)
    tox -e mutation -- --guards --survivors core  # only the last guard run's survivors again

Each area runs in build/mutation/<area>/: a fresh copy of src/, tests/, deploy/, conftest.py
and pyproject.toml whose [tool.mutmut] table (the shared settings) is narrowed to the area's
modules and fast tests. mutmut keeps its results there: a second run tests the mutants of
functions that changed, then the previous survivors (new tests may kill them); the killed
ones are not run again. Every mutant runs only the area's tests that call the mutated
function (mutmut records who calls what in a first, clean run).

Hypothesis runs derandomized, without deadlines and without shrinking under mutation
(mutation_profile.py in the work dir): a survivor is reproducible, no mutant is "killed" by a
slow example, and a killed one does not spend minutes on a minimal example. Timeouts: each
test gets 20 s (pytest-timeout), each mutant 3x the CPU time its tests took clean (mutmut);
a mutant that hangs counts as killed.

After each area: the score per module (killed / mutants; a timeout counts as killed, a
mutant no test reaches counts as surviving) and the diff of every survivor. The exit code is
0 even with survivors: the figures are read and explained in docs/testing.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"


@dataclass(frozen=True)
class Area:
    what: str
    mutate: tuple[str, ...]
    """Source files to mutate (globs, relative to the repository)."""
    tests: tuple[str, ...]
    """The fast tests run against the mutants (globs); all of them run once, clean."""
    functions: tuple[str, ...] = ()
    """mutmut mutant-name globs; empty: every function of `mutate`."""
    skip_tests: tuple[str, ...] = ()


AREAS: dict[str, Area] = {
    "core": Area(
        "the pure modules: plans, the fence and purge decisions, allocation, placement",
        mutate=("src/eipctl/core/*.py",),
        tests=("tests/unit/test_*.py", "tests/unit/core/test_*.py"),
        skip_tests=("tests/unit/test_metrics_catalogue.py",),
    ),
    "writer": Area(
        "kube/writer.py and write_ids.py: conflict re-apply, ambiguous creates, write ids",
        mutate=("src/eipctl/kube/writer.py", "src/eipctl/kube/write_ids.py"),
        # + the reservation stories: in-process (the allocator runs in the test's loop), 3 s
        tests=(
            "tests/unit/kube/test_writer*.py",
            "tests/integration/test_allocator_reservation.py",
        ),
    ),
    "leader": Area(
        "kube/leader.py: the elector, renew deadline, stepping down",
        mutate=("src/eipctl/kube/leader.py",),
        tests=("tests/unit/kube/test_leader*.py",),
    ),
    "controller": Area(
        "the controller's fence watchdog, heartbeat and purge pass",
        mutate=(
            "src/eipctl/controller/fencing.py",
            "src/eipctl/controller/heartbeat.py",
            "src/eipctl/controller/link_reconciler.py",
        ),
        tests=("tests/unit/controller/test_*.py",),
        functions=(
            "eipctl.controller.fencing.xǁFenceWatchǁ*",
            "eipctl.controller.heartbeat.xǁHeartbeatǁ*",
            "eipctl.controller.link_reconciler.xǁLinkReconcilerǁreconcile__mutmut_*",
            "eipctl.controller.link_reconciler.xǁLinkReconcilerǁrelease_all__mutmut_*",
        ),
    ),
    "scheduler": Area(
        "the scheduler's placement pass and the pure-ish modules it reads and writes through",
        mutate=(
            "src/eipctl/scheduler/placing.py",
            "src/eipctl/scheduler/per_node.py",
            "src/eipctl/scheduler/view.py",
            "src/eipctl/scheduler/claim_facts.py",
            "src/eipctl/scheduler/claim_messages.py",
            "src/eipctl/scheduler/claims.py",
            "src/eipctl/scheduler/digests.py",
            "src/eipctl/scheduler/local_traffic.py",
            "src/eipctl/scheduler/pass_claims.py",
            "src/eipctl/scheduler/claim_writes.py",
            "src/eipctl/scheduler/planned_moves.py",
            "src/eipctl/scheduler/claims_by_node.py",
        ),
        tests=("tests/unit/scheduler/test_*.py",),
    ),
    "reservation": Area(
        "the allocator's claim-first reservation (ServiceReconciler._acquire)",
        mutate=("src/eipctl/allocator/services.py",),
        tests=("tests/unit/allocator/test_*.py", "tests/integration/test_allocator_reservation.py"),
        # reads services.py's source for the problem reasons: a mutated copy fails it
        skip_tests=("tests/unit/allocator/test_metrics.py",),
        functions=(
            "eipctl.allocator.services.xǁServiceReconcilerǁ_acquire__mutmut_*",
            "eipctl.allocator.services.xǁServiceReconcilerǁ_seen__mutmut_*",
        ),
    ),
}

DETECTED = {"killed", "timeout", "caught by type check", "segfault"}
"""mutmut statuses that mean a test (or the runtime) noticed the mutant."""

PROFILE = '''"""Loaded by tools/mutation.py's runs only (-p mutation_profile)."""
from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "mutation",
    derandomize=True,  # the same examples for every mutant: survivors are reproducible
    deadline=None,  # a slow example is not a kill
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is all we need
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile("mutation")
'''


def _mutmut() -> str:
    """mutmut beside this interpreter (a venv run without activating it), else on PATH."""
    beside = Path(sys.executable).parent / "mutmut"
    return str(beside) if beside.exists() else shutil.which("mutmut") or "mutmut"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("areas", nargs="*", help="area or area.module (default: all areas)")
    parser.add_argument("--list", action="store_true", help="show the areas and exit")
    parser.add_argument("--report", action="store_true", help="print the last results only")
    parser.add_argument(
        "--guards", action="store_true", help="the guard operators (tools/guard_mutants.py)"
    )
    parser.add_argument(
        "--survivors", action="store_true", help="with --guards: the last run's survivors only"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="with --guards: the killed ones again too"
    )
    parser.add_argument(
        "--jobs", type=int, default=int(os.environ.get("MUTATION_JOBS", os.cpu_count() or 2))
    )
    args = parser.parse_args(argv)
    if args.list:
        for name, area in AREAS.items():
            print(f"{name}: {area.what}")
            print(f"    mutates {', '.join(area.mutate)}")
            print(f"    tests   {' '.join(_tests(area))}")
        return 0
    selected = _selection(args.areas or list(AREAS))
    os.nice(10)  # 2-core machines are shared: the mutants yield to everything else
    if args.guards:
        for name, modules in selected.items():
            area = AREAS[name]
            flags = {"survivors": args.survivors, "fresh": args.fresh, "only": args.report}
            print(_guards(name, area, modules, **flags))
        return 0
    for name, modules in selected.items():
        area = AREAS[name]
        started = time.monotonic()
        if not args.report:
            code = _run(name, area, modules, args.jobs)
            if code != 0:
                print(f"mutmut run for {name} failed (exit {code})")
                return code
        print(_report(name, area, modules, time.monotonic() - started, args.report))
    return 0


def _selection(requested: list[str]) -> dict[str, list[str]]:
    """area -> the modules asked for, as in `core.link_plan` (empty: the whole area)."""
    selected: dict[str, list[str]] = {}
    for item in requested:
        name, _, module = item.partition(".")
        if name not in AREAS:
            raise SystemExit(f"unknown area {name!r}; areas: {', '.join(AREAS)}")
        modules = selected.setdefault(name, [])
        if module:
            modules.append(module)
        elif modules:
            modules.clear()  # the whole area was asked for too
    return selected


def _tests(area: Area) -> list[str]:
    found = sorted({str(p.relative_to(ROOT)) for g in area.tests for p in ROOT.glob(g)})
    return [t for t in found if t not in area.skip_tests]


def _filters(area: Area, modules: list[str]) -> list[str]:
    """mutmut mutant-name globs for this run (empty: every mutant of the area)."""
    if not modules:
        return list(area.functions)
    package = area.mutate[0].removeprefix("src/").rsplit("/", 1)[0].replace("/", ".")
    prefixes = [f"{package}.{m}." for m in modules]
    if area.functions:
        return [f for f in area.functions if f.startswith(tuple(prefixes))]
    return [f"{p}*" for p in prefixes]


def _prepare(name: str, area: Area) -> Path:
    """The area's work dir: a fresh copy of the tree, mutmut's state (mutants/) kept."""
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".hypothesis")
    for sub in ("src", "tests", "deploy", "docs"):  # tests read docs (test_crds)
        shutil.rmtree(work / sub, ignore_errors=True)
        # copy2 keeps mtimes (mutmut re-mutates a file only if it changed); crds/ is a
        # symlink into deploy/, copied as files
        shutil.copytree(ROOT / sub, work / sub, ignore=ignore, copy_function=shutil.copy2)
    shutil.copy2(ROOT / "conftest.py", work / "conftest.py")
    (work / "mutation_profile.py").write_text(PROFILE)
    (work / "pyproject.toml").write_text(_pyproject(area))
    return work


def _pyproject(area: Area) -> str:
    """The project's pyproject.toml with [tool.mutmut] narrowed to the area."""
    text = (ROOT / "pyproject.toml").read_text()
    shared = tomllib.loads(text)["tool"]["mutmut"]
    table = dict(shared)
    table["only_mutate"] = list(area.mutate)
    table["also_copy"] = [*shared.get("also_copy", []), "mutation_profile.py"]
    table["pytest_add_cli_args"] = [
        *shared.get("pytest_add_cli_args", []),
        "-p",
        "mutation_profile",
    ]
    table["pytest_add_cli_args_test_selection"] = _tests(area)
    body = "\n".join(f"{key} = {json.dumps(value)}" for key, value in table.items())
    # drop the shared table (header to the next header) and append the narrowed one
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[)", "", text)
    return f"{text.rstrip()}\n\n[tool.mutmut]\n{body}\n"


def _run(name: str, area: Area, modules: list[str], jobs: int) -> int:
    """mutmut run on the area; then the previous survivors again (new tests may kill them:
    mutmut itself re-tests only mutants it has no result for, or of changed functions)."""
    work = WORK / name
    before = _results(work, area, modules) if (work / "mutants").is_dir() else {}
    survivors = [m for s in before.values() for m, v in s.items() if v not in DETECTED]
    # a different list of test files makes mutmut re-test every mutant anyway
    listed = work / "tests.txt"
    same_tests = listed.is_file() and listed.read_text().split() == _tests(area)
    _prepare(name, area)
    listed.unlink(missing_ok=True)  # written back once mutmut has run with this list
    named = _filters(area, modules)
    runs = [named, survivors] if survivors and same_tests and not named else [named]
    for names in runs:
        cmd = [_mutmut(), "run", "--max-children", str(jobs), *names]
        shown = " ".join(cmd[1:4]) + (f" + {len(names)} names" if names else "")
        print(f"=== mutation: {name} ({shown}) in {work.relative_to(ROOT)}", flush=True)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        code = subprocess.run(cmd, cwd=work, env=env, check=False).returncode
        if code != 0:
            return code
    listed.write_text("\n".join(_tests(area)) + "\n")
    return 0


def _guards(
    name: str, area: Area, modules: list[str], *, survivors: bool, fresh: bool, only: bool
) -> str:
    """The guard operators on the area (one mutant at a time, in its own copy of the tree);
    results merge into build/mutation/<area>/guards.json, the report is rewritten."""
    import guard_mutants as guards

    work = WORK / name
    store = work / "guards.json"
    previous = {r.key: r for r in guards.load(store)}
    paths = sorted(
        str(p.relative_to(ROOT)) for g in area.mutate for p in ROOT.glob(g) if p.is_file()
    )
    if modules:
        paths = [p for p in paths if Path(p).stem in modules]
    functions = {p: guards.mutmut_globs_to_functions(area.functions, _module(p)) for p in paths}
    current = {m.key for p in paths for m in guards.find_mutants(ROOT, p, functions[p])}
    started = time.monotonic()
    if not only:
        work.mkdir(parents=True, exist_ok=True)
        _prepare_guards(work)

        def skip(mutant: guards.Mutant) -> bool:
            """Killed ones are not run again; survivors are, and with --survivors only they."""
            done = previous.get(mutant.key)
            if survivors:
                return done is None or done.status in guards.DETECTED
            return fresh is False and done is not None and done.status in guards.DETECTED

        def record(result: guards.Result) -> None:
            previous[result.key] = result
            guards.save(list(previous.values()), store)

        guards.run_area(
            ROOT, work, paths, tests=_tests(area), functions=functions, skip=skip, record=record
        )
    shown = [r for r in previous.values() if r.key in current]
    lines = [
        f"=== {name}: guard operators, score per module"
        + ("" if only else f" (this run: {time.monotonic() - started:.0f} s)")
    ]
    for label, group in [*_grouped(shown, lambda r: _module(r.path)), ("all", shown)]:
        killed = sum(r.status in guards.DETECTED for r in group)
        by_op = Counter(r.operator for r in group if r.status not in guards.DETECTED)
        left = ", ".join(f"{op} {n}" for op, n in sorted(by_op.items()))
        score = 100 * killed / len(group) if group else 100.0
        lines.append(f"{label:42} {score:5.1f}%  {killed}/{len(group)} killed"
                     + (f"  (survived: {left})" if left else ""))  # fmt: skip
    if len(shown) < len(current):
        lines.append(f"{'not run yet':42} {len(current) - len(shown)} mutants")
    alive = [r for r in shown if r.status not in guards.DETECTED]
    if alive:
        lines.append(f"--- {len(alive)} not killed:")
        lines += [f"# {r.function} [{r.operator}]: {r.status}\n{r.diff}" for r in alive]
    text = "\n".join(lines)
    if shown:
        (work / "guards-report.txt").write_text(text + "\n")
    return text


def _prepare_guards(work: Path) -> None:
    """A fresh copy of the tree for the guard mutants (mutmut's mutants/ is not touched)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".hypothesis")
    for sub in ("src", "tests", "deploy", "docs"):  # tests read docs (test_crds)
        shutil.rmtree(work / sub, ignore_errors=True)
        shutil.copytree(ROOT / sub, work / sub, ignore=ignore)
    shutil.copy2(ROOT / "conftest.py", work / "conftest.py")
    shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
    (work / "mutation_profile.py").write_text(PROFILE)


def _module(path: str) -> str:
    return path.removeprefix("src/").removesuffix(".py").replace("/", ".")


def _grouped(items: list[T], key: Callable[[T], str]) -> list[tuple[str, list[T]]]:
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return sorted(groups.items())


def _results(work: Path, area: Area, modules: list[str]) -> dict[str, dict[str, str]]:
    """module -> mutant -> status, from mutmut's result files."""
    from mutmut.stats import status_by_exit_code

    filters = _filters(area, modules)
    by_module: dict[str, dict[str, str]] = {}
    for meta in sorted((work / "mutants").glob("src/**/*.py.meta")):
        source = str(meta.relative_to(work / "mutants")).removesuffix(".meta")
        if not any(fnmatch.fnmatch(source, g) for g in area.mutate):
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        module = source.removeprefix("src/").removesuffix(".py").replace("/", ".")
        for mutant, code in codes.items():
            if filters and not any(fnmatch.fnmatch(mutant, f) for f in filters):
                continue
            by_module.setdefault(module, {})[mutant] = status_by_exit_code[code]
    return by_module


def _report(name: str, area: Area, modules: list[str], elapsed: float, only: bool) -> str:
    work = WORK / name
    results = _results(work, area, modules)
    lines = [f"=== {name}: score per module" + ("" if only else f" (this run: {elapsed:.0f} s)")]
    total: Counter[str] = Counter()
    survivors: list[str] = []
    for module, statuses in results.items():
        counts = Counter(statuses.values())
        total.update(counts)
        lines.append(_score_line(module, counts))
        survivors += [m for m, s in statuses.items() if s not in DETECTED]
    lines.append(_score_line("all", total))
    if survivors:
        lines.append(f"--- {len(survivors)} not killed:")
        lines += [_diff(work, mutant, statuses_of(results, mutant)) for mutant in survivors]
    text = "\n".join(lines)
    (work / "report.txt").write_text(text + "\n")
    return text


def statuses_of(results: dict[str, dict[str, str]], mutant: str) -> str:
    return next(s[mutant] for s in results.values() if mutant in s)


def _diff(work: Path, mutant: str, status: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    source = "src/" + re.split(r"\.x[ǁ_]", mutant, maxsplit=1)[0].replace(".", "/") + ".py"
    here = Path.cwd()
    os.chdir(work)  # mutmut reads its files relative to the work dir
    try:
        diff = get_diff_for_mutant(mutant, path=source)
    except Exception as exc:  # a report must not die on one mutant
        diff = f"(no diff: {exc!r})"
    finally:
        os.chdir(here)
    return f"# {mutant}: {status}\n{diff.rstrip()}"


def _score_line(module: str, counts: Counter[str]) -> str:
    mutants = sum(counts.values())
    killed = sum(counts[s] for s in DETECTED)
    score = 100 * killed / mutants if mutants else 100.0
    others = ", ".join(f"{s} {n}" for s, n in sorted(counts.items()) if s not in DETECTED)
    return f"{module:42} {score:5.1f}%  {killed}/{mutants} killed" + (
        f"  ({others})" if others else ""
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
