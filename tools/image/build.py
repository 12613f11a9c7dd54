"""Build the eipctl image without Docker and without a registry: podman on a local Debian base.

    python tools/image/build.py                  # -> localhost/eipctl:<version>
    python tools/image/build.py --tag localhost/eipctl:dev --extras aws
    python tools/image/build.py --refresh-base   # a new base (Debian updates), then the image
    python tools/image/build.py ensure-tools     # apt-get install what is missing (root)

Three steps, each timed (the figures are printed, docs/operations.md "Image"):

1. wheels: `pip wheel` of eipctl (from a copy of its sources: nothing is written into the
   tree) and of its dependencies, with this interpreter (it must be CPython 3.11, the base's
   python3), plus pip's own wheel, which installs them in the build.
2. base: a Debian bookworm root filesystem with python3 (and ca-certificates, netbase), made by
   mmdebstrap (variant essential: no apt, no pip; merged /usr; no docs, man pages, locales),
   imported with `podman import` as localhost/eipctl-base:bookworm-<key>. The key hashes
   everything that shapes the base; the tarball is kept in the cache directory
   (/var/cache/eipctl-image, or EIPCTL_IMAGE_CACHE) and the image in podman's storage, so
   later builds reuse them. --refresh-base builds it again (security updates).
3. image: `podman build --network none --pull=never` of the repository's Dockerfile with
   `--build-arg BASE=<base>`, on a context holding only wheels/ (the Dockerfile installs
   prebuilt wheels when there are). The image this tag named before is removed.

Needs root (mmdebstrap's root mode, rootful podman), podman with crun, and mmdebstrap; the
network only for step 1 (PyPI) and a cold step 2 (the Debian mirror, EIPCTL_IMAGE_MIRROR).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
CACHE = Path(os.environ.get("EIPCTL_IMAGE_CACHE") or "/var/cache/eipctl-image")
SUITE = "bookworm"  # its python3 is 3.11, like python:3.11-slim
PYTHON = (3, 11)
MIRROR = os.environ.get("EIPCTL_IMAGE_MIRROR") or "http://deb.debian.org/debian"
SECURITY = os.environ.get("EIPCTL_IMAGE_SECURITY_MIRROR") or "http://deb.debian.org/debian-security"
BASE_PACKAGES = ("python3", "ca-certificates", "netbase")
MMDEBSTRAP_OPTIONS = (
    "--variant=essential",
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",  # else usrmerge pulls in perl
    *(
        f"--dpkgopt=path-exclude=/usr/share/{d}/*"
        for d in ("doc", "man", "info", "locale", "lintian", "linda")
    ),
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",  # the licences stay
)
BASE_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8")
BASE_REPO = "localhost/eipctl-base"
SOURCES = ("pyproject.toml", "README.md", "src", "deploy/crds")  # as .dockerignore lets in
# ... and leaves out: the one-machine sandbox and the API emulator are not for a cluster
# (docs/internals.md), so the production image installs neither
LEFT_OUT = ("src/kubemu", "src/eipctl/sandbox")
APT_PACKAGES = ("podman", "crun", "mmdebstrap")  # podman brings conmon, CNI plugins, uidmap
CAP_SYS_RESOURCE = 24
PODMAN_NPROC = 32768  # podman 4.3 lowers its own hard RLIMIT_NPROC to this (buildah's default)
MAX_NOFILE = 1048576  # what podman asks for by default


def version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"', text, re.M)
    return found.group(1) if found else "dev"


DEFAULT_TAG = f"localhost/eipctl:{version()}"


# ---- this machine's container runtime ----


def crun_cannot_run() -> bool:
    """A hybrid cgroup layout (v1 controllers, cgroup2 on /sys/fs/cgroup/unified) with some
    controller left on the cgroup2 side: crun 1.8 refuses every container there ("cgroups in
    hybrid mode not supported, drop all controllers from cgroupv2"), runc runs them."""
    root = Path("/sys/fs/cgroup")
    unified = root / "unified" / "cgroup.controllers"
    if (root / "cgroup.controllers").exists() or not unified.exists():
        return False
    return bool(unified.read_text().strip())


def runtime() -> str:
    """The OCI runtime: crun, or runc where crun cannot run (EIPCTL_IMAGE_RUNTIME wins)."""
    return os.environ.get("EIPCTL_IMAGE_RUNTIME") or ("runc" if crun_cannot_run() else "crun")


def tools() -> tuple[str, ...]:
    return ("podman", runtime(), "mmdebstrap")


def podman() -> list[str]:
    return ["podman", "--runtime", runtime()]


def ulimits() -> list[str]:
    """--ulimit options for podman run/build when this process lacks CAP_SYS_RESOURCE (a
    sandboxed root): podman 4.3 asks for nofile 1048576 regardless, and the runtime's
    setrlimit fails with EPERM; so ask for no more than this process's hard limits."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    if int(status["CapEff"], 16) & (1 << CAP_SYS_RESOURCE):
        return []

    def hard(which: int, cap: int) -> int:
        limit = resource.getrlimit(which)[1]
        return cap if limit == resource.RLIM_INFINITY else min(limit, cap)

    nofile = hard(resource.RLIMIT_NOFILE, MAX_NOFILE)
    nproc = hard(resource.RLIMIT_NPROC, PODMAN_NPROC)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def why_unavailable() -> str | None:
    """Why this machine cannot build the image (None: it can)."""
    if sys.platform != "linux":
        return "the image is built on Linux only"
    if os.geteuid() != 0:
        return "building the image needs root (mmdebstrap root mode, rootful podman)"
    missing = [t for t in tools() if shutil.which(t) is None]
    if missing:
        return (
            f"missing {', '.join(missing)}: apt-get install {' '.join(apt_packages())} "
            "(or python tools/image/build.py ensure-tools)"
        )
    return None


def apt_packages() -> tuple[str, ...]:
    return (*APT_PACKAGES, "runc") if runtime() == "runc" else APT_PACKAGES


def ensure_tools() -> int:
    """apt-get install the tools when some are missing (root, Debian); else say why not."""
    missing = [t for t in tools() if shutil.which(t) is None]
    if not missing:
        print("image tools: all present", file=sys.stderr)
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"image tools missing ({', '.join(missing)}), not installed: needs root and apt")
        return 0  # the image tests then skip, saying what is missing
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *apt_packages()]
    subprocess.run(install, check=True, env=env)
    return 0


class BuildError(RuntimeError):
    pass


@dataclass
class Result:
    image: str
    image_id: str
    base: str
    size: int  # bytes, as `podman image inspect` gives .Size
    base_size: int
    base_cached: bool
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        steps = ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        cached = "cached" if self.base_cached else "built"
        return (
            f"{self.image} ({self.image_id[:12]}): {self.size / 1e6:.1f} MB; base {self.base} "
            f"({cached}, {self.base_size / 1e6:.1f} MB); {steps}"
        )


def run(argv: Sequence[str], log: Path | None = None, **kwargs: object) -> str:
    """Run a command; its output goes to `log` (appended) or is returned. Fails with the
    tail of the output."""
    out = subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    text = out.stdout + out.stderr
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(argv)}\n{text}\n")
    if out.returncode != 0:
        tail = "\n".join(text.splitlines()[-30:])
        where = f" (log: {log})" if log is not None else ""
        raise BuildError(f"{' '.join(argv[:3])}... failed ({out.returncode}){where}:\n{tail}")
    return out.stdout


@contextlib.contextmanager
def timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        seconds[step] = time.monotonic() - start


# ---- 1. wheels ----


def stage_sources(dest: Path) -> Path:
    """A copy of what the wheel is built from, so that the build writes nothing in the tree."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    left_out = {ROOT / name for name in LEFT_OUT}

    def ignore(directory: str, names: list[str]) -> set[str]:
        return set(skip(directory, names)) | {n for n in names if Path(directory, n) in left_out}

    for name in SOURCES:
        src, dst = ROOT / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True, ignore=ignore)  # src/eipctl/crds: a link
        else:
            shutil.copy2(src, dst)
    return dest


def build_wheels(dest: Path, python: str, extras: str, log: Path) -> list[str]:
    probe = "import platform, sys; print(sys.version_info[:2] == %r, platform.machine())"
    same, machine = run([python, "-c", probe % (PYTHON,)]).split()
    if same != "True" or machine != platform.machine():
        raise BuildError(
            f"{python} is not CPython {PYTHON[0]}.{PYTHON[1]} on {platform.machine()}: the "
            "wheels must fit the base's python3 (--python names another interpreter)"
        )
    with tempfile.TemporaryDirectory(prefix="eipctl-image-src-") as tmp:
        source = stage_sources(Path(tmp))
        spec = f"{source}[{extras}]" if extras else str(source)
        run([python, "-m", "pip", "wheel", "-q", "--wheel-dir", str(dest), spec, "pip"], log)
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    if not any(w.startswith("eipctl-") for w in wheels):
        raise BuildError(f"no eipctl wheel in {dest}: {wheels}")
    return wheels


# ---- 2. base ----


def base_sources() -> list[str]:
    return [
        f"deb {MIRROR} {SUITE} main",
        f"deb {MIRROR} {SUITE}-updates main",
        f"deb {SECURITY} {SUITE}-security main",
    ]


def base_ref() -> str:
    recipe = {
        "suite": SUITE,
        "sources": base_sources(),
        "packages": BASE_PACKAGES,
        "options": MMDEBSTRAP_OPTIONS,
        "env": BASE_ENV,
        "arch": platform.machine(),
    }
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return f"{BASE_REPO}:{SUITE}-{key}"


def image_id(ref: str) -> str | None:
    out = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def image_size(ref: str) -> int:
    return int(run(["podman", "image", "inspect", "--format", "{{.Size}}", ref]).strip())


def ensure_base(cache: Path, log: Path, refresh: bool = False) -> tuple[str, bool]:
    """The base image's reference, and whether it was there already."""
    ref = base_ref()
    tarball = cache / f"{ref.rsplit(':', 1)[1]}.tar"
    old = image_id(ref)
    if old is not None and not refresh:
        return ref, True
    if refresh or not tarball.exists():
        partial = tarball.with_suffix(".tar.partial")
        partial.unlink(missing_ok=True)
        include = f"--include={','.join(BASE_PACKAGES)}"
        argv = ["mmdebstrap", *MMDEBSTRAP_OPTIONS, include, "--format=tar", SUITE, str(partial)]
        try:
            run([*argv, *base_sources()], log)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.rename(tarball)
        for stale in cache.glob(f"{SUITE}-*.tar"):  # other recipes' tarballs
            if stale != tarball:
                stale.unlink()
    changes = [f"--change=ENV {e}" for e in BASE_ENV] + ['--change=CMD ["python3"]']
    run(["podman", "import", "-q", *changes, str(tarball), ref], log)
    if old is not None and old != image_id(ref):
        remove_image(old)
    return ref, False


def remove_image(ident: str) -> None:
    """Remove an image this tool made before (not if a container still uses it)."""
    subprocess.run(["podman", "rmi", ident], capture_output=True, check=False)


# ---- 3. image ----


def build_image(tag: str, base: str, wheels: Path, extras: str, log: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="eipctl-image-ctx-") as tmp:
        context = Path(tmp)
        shutil.copytree(wheels, context / "wheels")
        shutil.copy2(ROOT / ".dockerignore", context / ".dockerignore")
        old = image_id(tag)
        argv = [*podman(), "build", "--network", "none", "--pull=never", "--layers=false"]
        argv += ulimits()
        argv += ["--build-arg", f"BASE={base}", "--build-arg", f"EXTRAS={extras}"]
        run([*argv, "--file", str(DOCKERFILE), "--tag", tag, str(context)], log)
    new = image_id(tag)
    if new is None:
        raise BuildError(f"podman build made no image {tag}")
    if old is not None and old != new:
        remove_image(old)
    return new


def build(
    tag: str = DEFAULT_TAG,
    *,
    cache: Path = CACHE,
    python: str = sys.executable,
    extras: str = "",
    refresh_base: bool = False,
) -> Result:
    if (reason := why_unavailable()) is not None:
        raise BuildError(reason)
    cache.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    start = time.monotonic()
    lock = (cache / "lock").open("w")
    with lock, tempfile.TemporaryDirectory(prefix="eipctl-image-wheels-") as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time shares the cache
        log = cache / "last-build.log"
        log.write_text(f"eipctl image build {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        with timed(seconds, "wheels"):
            build_wheels(Path(tmp), python, extras, log)
        with timed(seconds, "base"):
            base, cached = ensure_base(cache, log, refresh=refresh_base)
        with timed(seconds, "image"):
            ident = build_image(tag, base, Path(tmp), extras, log)
    seconds["total"] = time.monotonic() - start
    return Result(tag, ident, base, image_size(tag), image_size(base), cached, seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", nargs="?", default="build", choices=["build", "ensure-tools"])
    parser.add_argument("--tag", default=DEFAULT_TAG)
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--python", default=sys.executable, help="builds the wheels (3.11)")
    parser.add_argument("--extras", default="", help="eipctl extras to install, e.g. aws")
    parser.add_argument("--refresh-base", action="store_true", help="rebuild the Debian base")
    args = parser.parse_args(argv)
    if args.action == "ensure-tools":
        return ensure_tools()
    try:
        result = build(
            args.tag,
            cache=args.cache_dir,
            python=args.python,
            extras=args.extras,
            refresh_base=args.refresh_base,
        )
    except BuildError as exc:
        print(f"image build failed: {exc}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
