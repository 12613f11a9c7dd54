"""`python -m kubemu --port N --kubeconfig-out FILE`: run the emulator alone."""

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
        prog="python -m kubemu",
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


async def serve(args: argparse.Namespace) -> int:
    """Run until SIGINT/SIGTERM (exit status 0) or until a restart fails (1): a server that
    could not listen again is no server, so it goes rather than run on listening nowhere."""
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
        log.info("kubeconfig.written", path=args.kubeconfig_out, url=srv.url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.create_task(stop.wait())
    failing = asyncio.create_task(srv.failed())
    try:
        await asyncio.wait((stopping, failing), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (stopping, failing):
            task.cancel()
        await srv.stop()
    if srv.failure is not None:
        log.error("apiserver.exiting", reason="restart failed", error=str(srv.failure))
        return 1
    return 0


def main(argv: list[str] | None = None) -> None:
    """Entry point: uvloop when available. Exits 1 when a restart failed."""
    args = parse_args(argv)
    try:
        import uvloop
    except ImportError:
        code = asyncio.run(serve(args))
    else:
        code = uvloop.run(serve(args))
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
