# eipctl image: one image, the process is chosen by the first argument
# (allocator, scheduler, controller, nodeips).
#
#   docker build -t eipctl:0.1.0 .          # on python:3.11-slim, wheels built in the build
#
# BASE is any image with Python 3.11 as `python3` (the venv below links to it). Without a
# registry, tools/image/build.py builds the image with podman on a Debian bookworm base made
# by mmdebstrap (python3 only, no pip), with the wheels built beforehand on the host in
# wheels/ of the build context and no network in the build (docs/operations.md, "Image").
# EXTRAS: optional extras of eipctl to install too, e.g. `aws` for `eipctl nodeips` with
# Elastic IPs (aiobotocore); without it the image has only the core dependencies.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ARG EXTRAS=""
WORKDIR /src
# .dockerignore lets in only pyproject.toml, README.md, src/ but the sandbox and the API
# emulator, deploy/crds/ (src/eipctl/crds links there) and wheels/. No cmd/: its
# launchers run one process outside the cluster; here ENTRYPOINT eipctl + args does.
COPY . ./
# Prebuilt wheels (wheels/eipctl-*.whl and its dependencies, and pip's own wheel) are only
# installed; without them they are built here with the base's pip (network needed).
# pip runs from its wheel into a venv without pip: the final image carries no pip, and a
# base without pip (Debian's python3) works the same way.
RUN set -eu; \
    spec="eipctl${EXTRAS:+[$EXTRAS]}"; \
    if ! ls wheels/eipctl-*.whl >/dev/null 2>&1; then \
        python3 -m pip --version >/dev/null 2>&1 || { \
            echo "no wheels/ in the build context and no pip in $(command -v python3):" \
                 "build the wheels first (tools/image/build.py)" >&2; exit 1; }; \
        python3 -m pip wheel --no-cache-dir --wheel-dir wheels ".${EXTRAS:+[$EXTRAS]}" pip; \
    fi; \
    python3 -m venv --without-pip /opt/eipctl; \
    pip_wheel="$(ls wheels/pip-*.whl 2>/dev/null | sort -V | tail -n 1)"; \
    [ -n "$pip_wheel" ] || { echo "wheels/ has no pip wheel to install them with" >&2; exit 1; }; \
    /opt/eipctl/bin/python "$pip_wheel/pip" install --no-cache-dir --no-index \
        --disable-pip-version-check --find-links wheels "$spec"; \
    /opt/eipctl/bin/eipctl version

FROM ${BASE}
COPY --from=build /opt/eipctl /opt/eipctl
# PATH spelled out: an image imported from a root filesystem has no environment of its own
ENV PATH=/opt/eipctl/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1
# The Deployments run as 65532; the controller's DaemonSet overrides to uid 0 with only
# NET_ADMIN and NET_RAW, which netlink address changes and raw ARP sockets need.
USER 65532:65532
ENTRYPOINT ["eipctl"]
