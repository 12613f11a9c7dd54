"""Guard mutants: the operators mutmut 3 lacks, run one mutant at a time on an area's copy.

mutmut flips `and` to `or` and `<` to `<=`, but never deletes one clause of a condition,
never negates a comprehension's filter and never drops an `if` before a side effect, so a
missing test for a guard clause scores 100 % (issue #34). Its operators are a fixed list in
`mutmut.mutation.mutators` with no configuration or plugin hook, hence this module:

- `clause`: a `BoolOp` of n >= 2 values loses one value (n mutants; `a and b` becomes `b`,
  then `a`);
- `filter-negate`: each comparison inside a comprehension's `if` filter becomes
  `not (...)`; a filter that is no comparison itself is also negated whole;
- `filter-drop`: a comprehension's `if` filter becomes `True`;
- `guard-drop`: an `if` without `else` (an `elif` included) whose body calls, assigns or
  deletes something gets the test `True`.

Only code inside functions is mutated (methods, nested, decorated and `@property` ones
included; module-level code is not). Each mutant is the original file with one expression
replaced as text, so its diff is that one change.

Running: tools/mutation.py --guards (docs/testing.md). A parent process imports pytest and
the tests' third-party libraries once, then forks one child per mutant, which writes nothing
but imports eipctl from the area's copy, where the one mutated file was written, and runs
pytest -x on the area's test files that import the mutated module (transitively, statically),
the module's own test files first. A kill ends at the first failure; a survivor runs them all.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import fnmatch
import hashlib
import importlib
import json
import os
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

OPERATORS = ("clause", "filter-negate", "filter-drop", "guard-drop")
DETECTED = {"killed", "timeout"}
_SIDE_EFFECTS = (ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)
_LOOSE = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_NEGATED = {"True": "False", "False": "True"}


@dataclass(frozen=True)
class Mutant:
    path: str
    """The mutated file, relative to the repository (src/eipctl/...)."""
    function: str
    """Qualified name of the enclosing function, as `Class.method` or `function`."""
    operator: str
    line: int
    start: int
    """Byte offsets of the replaced expression in the file."""
    end: int
    replacement: str

    @property
    def key(self) -> str:
        digest = hashlib.sha1(self.replacement.encode()).hexdigest()[:8]
        return f"{self.path}:{self.function}:{self.operator}:{self.start}-{self.end}:{digest}"

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement.encode() + source[self.end :]

    def diff(self, source: bytes) -> str:
        before = source.decode().splitlines(keepends=True)
        after = self.apply(source).decode().splitlines(keepends=True)
        lines = difflib.unified_diff(before, after, self.path, self.path, n=0)
        return "".join(lines).rstrip()


class _Finder(ast.NodeVisitor):
    """Walks one module; `mutants` collects every guard mutant inside a function."""

    def __init__(self, path: str, source: bytes) -> None:
        self.path = path
        self.source = source
        starts = [0]
        for line in source.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        self._line_start = starts
        self._scope: list[str] = []
        self._depth = 0  # functions entered
        self.mutants: list[Mutant] = []

    def _offset(self, line: int, col: int) -> int:
        return self._line_start[line - 1] + col  # ast's col_offset counts UTF-8 bytes

    def _span(self, node: ast.expr) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = self._offset(node.lineno, node.col_offset)
        return start, self._offset(node.end_lineno, node.end_col_offset)

    def _text(self, node: ast.expr) -> str:
        start, end = self._span(node)
        return self.source[start:end].decode()

    def _add(self, operator: str, node: ast.expr, replacement: str) -> None:
        start, end = self._span(node)
        function = ".".join(self._scope)
        self.mutants.append(
            Mutant(self.path, function, operator, node.lineno, start, end, replacement)
        )

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        is_function = not isinstance(node, ast.ClassDef)
        # a nested function's mutants are its enclosing top-level function's
        if not (is_function and self._depth):
            self._scope.append(node.name)
        self._depth += is_function
        for child in node.body:
            self.visit(child)
        self._depth -= is_function
        if not (is_function and self._depth):
            self._scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped  # noqa: N815

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        if self._depth:
            word = " and " if isinstance(node.op, ast.And) else " or "
            for i in range(len(node.values)):
                kept = [v for j, v in enumerate(node.values) if j != i]
                self._add("clause", node, word.join(_wrapped(self._text(v), v) for v in kept))
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if self._depth:
            for test in node.ifs:
                compares = [n for n in _walk_expression(test) if isinstance(n, ast.Compare)]
                for compare in compares:
                    self._add("filter-negate", compare, f"not ({self._text(compare)})")
                if not isinstance(test, ast.Compare):
                    self._add("filter-negate", test, f"not ({self._text(test)})")
                self._add("filter-drop", test, "True")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        always = isinstance(node.test, ast.Constant) and node.test.value is True
        if self._depth and not node.orelse and not always and _has_side_effect(node.body):
            self._add("guard-drop", node.test, "True")
        self.generic_visit(node)


def _wrapped(text: str, node: ast.expr) -> str:
    """An operand's text, parenthesised again if it was (its span leaves the parentheses
    out): an operand binds tighter than its `BoolOp` unless it is one of these."""
    return f"({text})" if isinstance(node, _LOOSE) else text


def _walk_expression(node: ast.expr) -> Iterator[ast.AST]:
    """The nodes of an expression, without entering nested comprehensions or lambdas."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (*_COMPREHENSIONS, ast.Lambda)):
            yield from _walk_expression(child)  # type: ignore[arg-type]


def _has_side_effect(body: list[ast.stmt]) -> bool:
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, _SIDE_EFFECTS):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def find_mutants(root: Path, path: str, functions: list[str]) -> list[Mutant]:
    """Every guard mutant of one file; `functions` (globs of `Class.method`) narrows them."""
    source = (root / path).read_bytes()
    finder = _Finder(path, source)
    finder.visit(ast.parse(source, path))
    found = finder.mutants
    if functions:
        found = [m for m in found if any(fnmatch.fnmatch(m.function, f) for f in functions)]
    return [_parsing(m, source) for m in found]


def _parsing(mutant: Mutant, source: bytes) -> Mutant:
    """The mutant, its replacement parenthesised if its place needs it (`x + not (...)`)."""
    for candidate in (mutant, replace(mutant, replacement=f"({mutant.replacement})")):
        try:
            ast.parse(candidate.apply(source))
        except SyntaxError:
            continue
        return candidate
    raise ValueError(f"no valid Python: {mutant}")


def mutmut_globs_to_functions(globs: tuple[str, ...], module: str) -> list[str]:
    """tools/mutation.py's `Area.functions` (mutmut names) as `Class.method` globs."""
    out = []
    for glob in globs:
        if not glob.startswith(module + "."):
            continue
        name = glob.removeprefix(module + ".").split("__mutmut_")[0]
        if name.startswith("xǁ"):
            name = ".".join(name.removeprefix("xǁ").split("ǁ"))
        else:
            name = name.removeprefix("x_")
        out.append(name.rstrip("*") + "*" if name.endswith("*") else name)
    return out


# --- which tests reach a module ----------------------------------------------------------


def _imports(root: Path, file: Path) -> set[str]:
    """Modules of src/ that `file` imports (as dotted names)."""
    tree = ast.parse(file.read_bytes())
    package = (
        ".".join(file.relative_to(root / "src").with_suffix("").parts[:-1])
        if str(file).startswith(str(root / "src"))
        else ""
    )
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return {n for n in names if _module_file(root, n)}


def _module_file(root: Path, name: str) -> Path | None:
    base = root / "src" / name.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reaching_tests(root: Path, tests: list[str], module: str) -> list[str]:
    """The test files whose static import closure (with the conftest.py files above them
    and the test helpers they import) contains `module`; its own test files first."""
    cache: dict[str, set[str]] = {}

    def closure(file: Path) -> set[str]:
        seen: set[str] = set()
        todo = list(_imports(root, file))
        for helper in _local_helpers(root, file):
            todo += _imports(root, helper)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name not in cache:
                found = _module_file(root, name)
                cache[name] = _imports(root, found) if found else set()
            todo += cache[name]
            todo += [name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)]
        return seen

    reached = [t for t in tests if module in closure(root / t)]
    short = module.rsplit(".", 1)[-1]
    own = [t for t in reached if Path(t).stem.removeprefix("test_").startswith(short)]
    return own + [t for t in reached if t not in own]


def _local_helpers(root: Path, test: Path) -> list[Path]:
    """The conftest.py files above a test and the test-side modules it imports (`polling`,
    `scheduler_harness`, `tests.virtual_clock`, ...), with theirs in turn."""
    dirs = [d for d in test.parents if d == root or root in d.parents]
    todo = [test, *(d / "conftest.py" for d in dirs if (d / "conftest.py").is_file())]
    found: list[Path] = []
    while todo:
        file = todo.pop()
        if file in found:
            continue
        found.append(file)
        for node in ast.walk(ast.parse(file.read_bytes())):
            named = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in named:
                relative = name.replace(".", "/") + ".py"
                todo += [d / relative for d in dirs if (d / relative).is_file()]
    return found[1:]


# --- running -----------------------------------------------------------------------------

PRELOAD = (
    "pytest",
    "hypothesis",
    "pytest_asyncio",
    "pytest_timeout",
    "yaml",
    "aiohttp",
    "kubernetes_asyncio.client",
    "jsonschema",
    "structlog",
    "prometheus_client",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "uvloop",
)


QUIET = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
"""The plugins preloaded above were imported before pytest could rewrite their asserts."""


@dataclass
class Result:
    key: str
    path: str
    function: str
    operator: str
    line: int
    status: str
    seconds: float
    diff: str


def run_one(work: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """pytest -x on `tests` in a forked child importing eipctl from `work`: its status, how
    long it took and the test file that failed first."""
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 3
        try:
            log = os.open(work / "guards-last.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(work)
            sys.path[:0] = [str(work / "src"), str(work)]
            import pytest

            args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "mutation_profile", *QUIET]
            code = int(pytest.main([*args, "--timeout=20", *tests]))
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = started + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", time.monotonic() - started, ""
        time.sleep(0.05)
    code = os.waitstatus_to_exitcode(status)
    verdict = {0: "survived", 1: "killed"}.get(code, f"error {code}")
    return verdict, time.monotonic() - started, _failed_file(work / "guards-last.log")


def _failed_file(log: Path) -> str:
    """The test file of the first failure in a child's output ("" if none)."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split()[1].split("::")[0]
    return ""


def preload() -> None:
    """The tests' third-party imports, once in the parent (the children inherit them)."""
    sys.dont_write_bytecode = True  # mutated files must not leave stale .pyc behind
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    leaked = [m for m in sys.modules if m.split(".")[0] in ("eipctl", "kubemu", "tests")]
    if leaked:
        raise SystemExit(f"eipctl imported before the fork: {leaked[:3]}")


def run_area(
    root: Path,
    work: Path,
    paths: list[str],
    *,
    tests: list[str],
    functions: dict[str, list[str]],
    skip: Callable[[Mutant], bool],
    record: Callable[[Result], None],
) -> None:
    """Every guard mutant of `paths` but those `skip` says, one at a time, in `work`.

    The test files run in `reaching_tests` order at first; then those that killed mutants
    of the module go first (a kill ends at the first failure: the sooner the better)."""
    preload()
    signal.signal(signal.SIGTERM, _exit_on_term)  # so that `finally` restores the file
    for path in paths:
        module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
        mutants = [m for m in find_mutants(root, path, functions.get(path, [])) if not skip(m)]
        if not mutants:
            continue
        reach = reaching_tests(work, tests, module)
        source = (root / path).read_bytes()
        clean, took, _ = run_one(work, reach, timeout=600)
        print(f"--- {module}: {len(mutants)} mutants, {len(reach)} test files, clean {took:.0f} s",
              flush=True)  # fmt: skip
        if clean != "survived":
            raise SystemExit(f"the clean tests of {module} fail ({clean}): {' '.join(reach)}")
        killers: Counter[str] = Counter()
        target = work / path
        try:
            for mutant in mutants:
                target.write_bytes(mutant.apply(source))
                order = sorted(reach, key=lambda t: -killers[t])  # stable: ties keep order
                status, seconds, killer = run_one(work, order, timeout=max(60.0, 3 * took + 10))
                killers[killer] += 1
                diff = mutant.diff(source)
                record(Result(mutant.key, path, mutant.function, mutant.operator, mutant.line,
                              status, seconds, diff))  # fmt: skip
                print(f"{status:9} {seconds:5.1f}s {mutant.operator:13} {path}:{mutant.line}",
                      flush=True)  # fmt: skip
        finally:
            target.write_bytes(source)


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def save(results: list[Result], file: Path) -> None:
    file.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")


def load(file: Path) -> list[Result]:
    return [Result(**r) for r in json.loads(file.read_text())] if file.is_file() else []
