"""kubernetes_asyncio's kubeconfig loader and ApiClient without its ~850 generated modules.

eipctl uses three things of kubernetes_asyncio: the kubeconfig and in-cluster loaders, the
``Configuration`` they fill and the ``ApiClient`` whose ``call_api`` adds the credentials
(objects are plain dicts here; no generated API class or model is used). But importing any of
it runs ``kubernetes_asyncio/__init__.py``, which imports every generated API and model: ~40 MB
of resident memory and ~0.4 s of start-up in every process, the controller on every node
included ([scale], docs/scale.md measured it as most of a process's fixed cost).

`install` registers stand-ins for the three packages whose ``__init__`` does that
(``kubernetes_asyncio``, ``.client``, ``.client.models``): real packages with the same
``__path__``, so every submodule imports as usual, whose attributes load on first use. The
names eipctl's path needs come from their own submodules; any other name (a generated API
class, a model: ``ApiClient.deserialize`` looks models up by name) runs the real
``__init__`` into the stand-in first, so nothing behaves differently, it only costs what it
always cost, once. Nothing is installed if kubernetes_asyncio is imported already (a test
process) or its layout is not the one known (then the normal import happens).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any, Final

import structlog

log = structlog.get_logger(__name__)

ROOT: Final = "kubernetes_asyncio"

LEAN_EXPORTS: Final[dict[str, dict[str, tuple[str, str | None]]]] = {
    ROOT: {"client": ("client", None), "config": ("config", None)},
    f"{ROOT}.client": {
        "ApiClient": ("api_client", "ApiClient"),
        "Configuration": ("configuration", "Configuration"),
        "ApiException": ("exceptions", "ApiException"),
        "rest": ("rest", None),
        "api_client": ("api_client", None),
        "configuration": ("configuration", None),
        "exceptions": ("exceptions", None),
    },
    f"{ROOT}.client.models": {},
}
"""Per stand-in package: name -> (its submodule, the attribute there; None: the submodule)."""


class _LeanPackage(types.ModuleType):
    """A package whose ``__init__`` has not run: known names from their submodules, any
    other name after running the real ``__init__`` (`_complete`)."""

    def __init__(self, name: str, directory: Path, exports: dict[str, tuple[str, str | None]]):
        super().__init__(name)
        self.__path__ = [str(directory)]
        self.__package__ = name
        self.__file__ = str(directory / "__init__.py")
        self._lean_exports = exports
        self._lean_complete = False

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr.startswith("_lean"):
            raise AttributeError(attr)
        known = self._lean_exports.get(attr)
        if known is not None:
            module = importlib.import_module(f"{self.__name__}.{known[0]}")
            value = module if known[1] is None else getattr(module, known[1])
            setattr(self, attr, value)
            return value
        if not self._lean_complete:
            self._complete()
            if attr in self.__dict__:
                return self.__dict__[attr]
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")

    def _complete(self) -> None:
        """Run the real ``__init__`` here: everything the package exports, as imported."""
        self._lean_complete = True
        source = Path(self.__file__ or "").read_text(encoding="utf-8")
        exec(compile(source, self.__file__ or "", "exec"), self.__dict__)
        log.debug("kube.lean_import.completed", package=self.__name__)


def install() -> bool:
    """Register the stand-ins (before the first import of kubernetes_asyncio); True if done."""
    if any(name == ROOT or name.startswith(ROOT + ".") for name in sys.modules):
        return False
    spec = importlib.util.find_spec(ROOT)
    if spec is None or spec.origin is None:
        return False
    root = Path(spec.origin).parent
    directories = {
        ROOT: root,
        f"{ROOT}.client": root / "client",
        f"{ROOT}.client.models": root / "client" / "models",
    }
    if not all((d / "__init__.py").is_file() for d in directories.values()):
        return False
    packages = {n: _LeanPackage(n, d, LEAN_EXPORTS[n]) for n, d in directories.items()}
    for name, package in packages.items():
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:  # as importing it would have bound it
            setattr(packages[parent], child, package)
    return True
