"""A fault-injecting HTTP proxy in front of the local kube-apiserver (test-only).

Clients talk plain HTTP to ``127.0.0.1:<port>``; the proxy forwards every request (headers, body, the bearer token)
to the API server over TLS (the cluster CA), streaming the answer back chunk by chunk, so watches work as they do
directly. While :attr:`FaultProxy.fraction` is above 0, that fraction of the write requests (POST/PUT/PATCH/DELETE)
is answered by the proxy itself, without reaching the API server, with a ``Status`` error whose code is drawn from
:attr:`FaultProxy.codes` (409 Conflict, 429 TooManyRequests with ``Retry-After: 1``, 500 InternalError), the
bodies the API server sends for those codes. :attr:`FaultProxy.injected` counts them by code.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
#: Hop-by-hop headers and those aiohttp recomputes; never forwarded in either direction.
_DROPPED = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
                      "proxy-connection", "te", "trailer"})


def status_body(code: int, message: str) -> dict[str, object]:
    """A ``v1 Status`` failure as kube-apiserver sends it."""
    details: dict[str, object] = {"retryAfterSeconds": 1} if code == 429 else {}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": REASONS.get(code, "InternalError"), "details": details, "code": code}


@dataclass
class FaultProxy:
    """The proxy; :meth:`start` it in the running event loop, :meth:`stop` it when done.

    Attributes:
        upstream: ``https://127.0.0.1:<port>`` of kube-apiserver.
        ca: the cluster CA certificate (PEM file).
        fraction: share of write requests answered with an injected error (0 = none; change it at any time).
        codes: the injected status codes, drawn uniformly.
        seed: seeds the random draws (reproducible runs for a given request order).
    """

    upstream: str
    ca: Path
    fraction: float = 0.0
    codes: tuple[int, ...] = (409, 429, 500)
    seed: int = 0
    injected: Counter[int] = field(default_factory=Counter)
    #: Write requests forwarded to the API server, and all requests forwarded.
    writes_forwarded: int = 0
    forwarded: int = 0
    url: str = ""
    _rng: random.Random = field(init=False)
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def start(self) -> str:
        """Listen on a free port of 127.0.0.1; returns the proxy's URL (``http://127.0.0.1:<port>``)."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # the bound port (TCPSite does not expose it otherwise)
        assert server is not None and isinstance(server, asyncio.base_events.Server)
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def start_in_thread(self) -> str:
        """:meth:`start` in an event loop of its own (a daemon thread), so that a test may block its own loop
        (e.g. while starting the operator that talks through the proxy). Returns the proxy's URL."""
        loop = asyncio.new_event_loop()
        self._loop, self._thread = loop, threading.Thread(target=loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self.start(), loop).result(timeout=30)

    def stop_thread(self) -> None:
        """Stop a proxy started with :meth:`start_in_thread`, and its loop."""
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def stop(self) -> None:
        """Stop listening, end every streamed watch, close the upstream connections."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _inject(self, method: str) -> int | None:
        if method in WRITE_METHODS and self.fraction > 0 and self._rng.random() < self.fraction:
            return self._rng.choice(self.codes)
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        code = self._inject(request.method)
        if code is not None:
            self.injected[code] += 1
            headers = {"Retry-After": "1"} if code == 429 else {}
            return web.json_response(status_body(code, f"injected by the fault proxy ({code})"), status=code,
                                     headers=headers)
        assert self._session is not None
        self.forwarded += 1
        if request.method in WRITE_METHODS:
            self.writes_forwarded += 1
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        try:
            upstream = await self._session.request(request.method, self.upstream + request.path_qs,
                                                   headers=headers, data=body or None, allow_redirects=False)
        except (aiohttp.ClientError, OSError) as exc:
            return web.json_response(status_body(503, f"fault proxy: API server unreachable: {exc}"), status=503)
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _DROPPED:
                    response.headers.add(key, value)
            await response.prepare(request)
            with contextlib.suppress(aiohttp.ClientError, ConnectionResetError, asyncio.TimeoutError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
            return response
        finally:
            upstream.release()
