"""A private asyncio loop on its own thread, so blocking test code never stalls the bed.

The relays, the responders and the API client of the bed live on one `BackgroundLoop`; the
client namespace has another (its thread joined the client namespace, so every socket it
opens is the client's). Tests stay synchronous and call `loop.run(coro)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from eipctl.sandbox.namespaces import enter_netns

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running forever on a daemon thread, optionally inside a namespace."""

    def __init__(self, name: str, netns: str | None = None) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._main, args=(netns,), name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error:
            raise self._error[0]

    def _main(self, netns: str | None) -> None:
        try:
            if netns is not None:
                enter_netns(netns)  # this thread only: sockets opened here belong to `netns`
        except BaseException as exc:
            self._error.append(exc)
            self._ready.set()
            return
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()
        # drain what is left so nothing warns about pending tasks
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
        """Run `coro` on this loop and wait for its result (from another thread)."""
        return self.submit(coro).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the loop thread (e.g. to open a socket in its namespace)."""

        async def wrapper() -> T:
            return fn(*args)

        return self.run(wrapper())

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
