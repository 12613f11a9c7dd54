# eipctl image: one image, the process is chosen by the first argument
# (allocator, scheduler, controller). Build: docker build -t eipctl:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# src/eipctl/crds links to deploy/crds: the wheel carries the CRDs for the sandbox
COPY deploy/crds ./deploy/crds
# No cmd/: its launchers run one process outside the cluster; here ENTRYPOINT eipctl + args does.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# The Deployments run as 65532; the controller's DaemonSet overrides to uid 0 with only
# NET_ADMIN and NET_RAW, which netlink address changes and raw ARP sockets need.
USER 65532:65532
ENTRYPOINT ["eipctl"]
