"""`python -m eipctl.sandbox.apiserver --port N --kubeconfig-out FILE`: run the emulator alone."""

from __future__ import annotations

import argparse
import asyncio
import signal

import structlog

from .server import ApiServer

log = structlog.get_logger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(
        prog="python -m eipctl.sandbox.apiserver",
        description="Kubernetes API emulator (eipctl sandbox)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    p.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    p.add_argument("--kubeconfig-out", help="write a kubeconfig for this server here")
    p.add_argument("--history-window", type=int, default=1000, help="events kept for watch replay")
    p.add_argument("--bookmark-interval", type=float, default=5.0, help="seconds between BOOKMARKs")
    p.add_argument("--token", help="require this bearer token")
    p.add_argument("--tls", action="store_true", help="serve HTTPS with a self-signed certificate")
    p.add_argument("--crds", help="directory of CRD YAML files to load at start")
    p.add_argument(
        "--deny-service-external-ips",
        action="store_true",
        help="enable the DenyServiceExternalIPs admission plugin (new spec.externalIPs refused)",
    )
    return p.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    """Run until SIGINT/SIGTERM."""
    srv = ApiServer(
        history_window=args.history_window,
        bookmark_interval=args.bookmark_interval,
        token=args.token,
        tls=args.tls,
        deny_service_external_ips=args.deny_service_external_ips,
    )
    await srv.start(host=args.host, port=args.port)
    if args.crds:
        await srv.load_crds_from_dir(args.crds)
    if args.kubeconfig_out:
        srv.write_kubeconfig(args.kubeconfig_out)
        log.info("kubeconfig written", path=args.kubeconfig_out, url=srv.url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await srv.stop()


def main(argv: list[str] | None = None) -> None:
    """Entry point: uvloop when available."""
    args = parse_args(argv)
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args))
    else:
        uvloop.run(serve(args))


if __name__ == "__main__":
    main()
