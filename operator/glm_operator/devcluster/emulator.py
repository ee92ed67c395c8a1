"""A local Kubernetes API emulator: kmock's ``KubernetesEmulator`` with the apiserver semantics we rely on.

Used as the pytest ``kmock`` fixture class, by :class:`EmulatorServer`
(a background-thread server for ``make run`` and subprocess tests), and by
``python -m glm_operator.devcluster.emulator --port PORT``. A real kopf operator, the official
``kubernetes`` client and ``kubectl --server URL --validate=false`` all talk to it.

For the fixture, return ``{"cls": Emulator}`` from a ``kmock_options`` fixture: kmock 0.8 loads
the ``kmock_cls`` ini option with ``__import__(module)`` + ``getattr``, which only finds classes
of top-level modules, so ``glm_operator.devcluster.emulator.Emulator`` cannot be named there.

What it adds to stock kmock 0.8 (``reference/testing-here.md`` §1.2–1.4 lists the gaps):

- create: ``uid``, ``resourceVersion`` (one counter from 1000), ``creationTimestamp``, ``generation: 1``,
  the namespace from the URL, ``generateName``, 201, 409 on a duplicate;
- PATCH (merge, strategic-merge as merge, JSON-patch with 422 on a failed op, server-side apply as a
  merge that creates a missing object with 201) and PUT (replace, 404 if missing), both with 409 on a
  stale ``metadata.resourceVersion``; ``generation`` bumps when ``spec`` changes; a patch that changes
  nothing stores nothing and emits no event (as the apiserver does);
- the ``status`` subresource: writes to ``.../status`` change only ``.status``, writes to the object
  keep the stored ``.status`` (for every resource whose discovery lists ``status``);
- DELETE with finalizers (``deletionTimestamp`` first, removal when they are gone), DELETE-collection,
  and the garbage collector's background cascade over ``ownerReferences[].uid``;
- a ``CustomResourceDefinition`` declares (and on deletion undeclares) its served versions, and
  every write of their custom resources (create, PUT, every patch, server-side apply, ``/status``
  for ``.status`` only) goes through the version's structural schema: unknown fields pruned,
  non-nullable nulls dropped, defaults applied, ``metadata`` reduced to ObjectMeta (see :mod:`._schema`);
- LIST with ``kind``/``apiVersion``/numeric ``resourceVersion``; LIST and WATCH honour
  ``labelSelector`` and ``fieldSelector``; WATCH replays only events newer than ``?resourceVersion=``,
  ends after ``timeoutSeconds``, and is served as ``application/json``;
- server-side printing: GET, LIST and WATCH answer with a ``meta.k8s.io`` ``Table`` when the ``Accept``
  header asks for one (as ``kubectl get`` does), with a CRD's ``additionalPrinterColumns`` or Name/Age
  (plus Ready for StatefulSets and Deployments), and ``?includeObject=`` (see :mod:`._tables`);
- :attr:`Emulator.request_log`, :meth:`Emulator.write_requests`, :meth:`Emulator.inject_failure`.

Not emulated: admission, schema validation (types, enums, patterns, ``required``, CEL), defaulting of
stored objects on read after a CRD change, field managers, RBAC, controllers (a StatefulSet never gets
Pods or status unless a test patches ``.../status``), BOOKMARK events.

kmock is pinned ``==0.8`` because this module uses its private parts: ``kmock._internal.aiobus``
(``Bus`` internals), ``kmock._internal.rendering`` (``Request``, ``StreamingError``), the emulator's
``_handle``/``_serve_*`` hooks and its ``_objects``, ``_resources``, ``_lock`` and ``_buses`` fields.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import pathlib
import signal
import sys
import threading
import time
import types
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import enums, filtering, rendering

from glm_operator.devcluster import _kube, _tables
from glm_operator.devcluster._store import CRD_RESOURCE, WRITE_METHODS, Outcome, RecordingBus, StoreEmulator, error

__all__ = ["CRD_RESOURCE", "Emulator", "EmulatorServer", "RequestRecord", "main", "write_kubeconfig"]

_STOP: Final = object()  # put on every bus to end the open watches when the server stops


@dataclasses.dataclass(slots=True)
class RequestRecord:
    """One HTTP request the emulator answered, in arrival order (see :attr:`Emulator.request_log`).

    ``content_type`` is the media type without parameters; ``status`` is 0 while the request is
    still being served (an open WATCH has 200 once its stream has started); ``received`` is
    ``time.monotonic()`` at arrival (seconds).
    """

    method: str
    path: str
    query: str
    content_type: str | None
    status: int
    received: float = dataclasses.field(default_factory=time.monotonic)
    #: The ``User-Agent`` header (tests tell the operator's requests from their own by it).
    user_agent: str = ""


_Printer = Callable[[list[dict[str, Any]], str | None], dict[str, Any]]


def _as_table_event(event: dict[str, Any], printing: _Printer | None) -> dict[str, Any]:
    """A watch event with its object rendered as a one-row ``Table`` (unchanged without ``printing``)."""
    if printing is None or not isinstance(event.get("object"), dict):
        return event
    obj = event["object"]
    return {**event, "object": printing([obj], (obj.get("metadata") or {}).get("resourceVersion"))}


@attrs.define
class _Injection:
    method: str
    plural: str
    subresource: str | None
    status: int
    remaining: int


def _status_response(exc: kmock.KubernetesError) -> aiohttp.web.Response:
    reason = exc.reason if exc.reason and " " not in exc.reason else None
    return aiohttp.web.json_response({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": exc.message or reason or f"HTTP {exc.status}",
        "reason": reason or _kube.STATUS_REASONS.get(exc.status, "Unknown"),
        "details": exc.details or {},
        "code": exc.status,
    }, status=exc.status)


@attrs.define(kw_only=True)
class Emulator(StoreEmulator):
    """kmock's in-memory Kubernetes API with identity fields, subresources, GC, CRDs and test hooks.

    Every instance declares kmock's bundled built-in resources plus InferencePool, HTTPRoute and
    PodMonitor (:meth:`declare_defaults`). State changes are serialized by kmock's lock.
    """

    #: Every HTTP request answered, in arrival order (appended from the emulator's event loop).
    request_log: list[RequestRecord] = attrs.field(factory=list, init=False)
    #: The ``gitVersion`` that ``/version`` reports (kmock's default is a k3s v1.26).
    kubernetes_version: str = "v1.31.0"

    _outcomes: dict[int, Outcome] = attrs.field(factory=dict, init=False)
    _in_flight: dict[int, RequestRecord] = attrs.field(factory=dict, init=False)
    _injections: list[_Injection] = attrs.field(factory=list, init=False)
    _injections_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # A sub-priority above kmock's own fallbacks: our mutations answer with what they stored,
        # and watches go out as JSON (kubectl refuses kmock's application/octet-stream).
        overrides = self.fallback ** 1
        overrides[filtering.FnCriteria(self._has_outcome)] << self._serve_outcome
        as_json: kmock.headers[None] = kmock.headers({"Content-Type": "application/json"})
        overrides[enums.action.WATCH] << as_json << self._serve_watch
        # The kubernetes client asks for these with a trailing slash.
        overrides["get /apis/"] << self._serve_apis
        overrides["get /api/"] << self._serve_api
        overrides["get /version/"] << self._serve_server_version
        self.declare_defaults()

    def declare_defaults(self) -> None:
        """Declare kmock's bundled built-ins and the CRs our operator writes (called on construction)."""
        with warnings.catch_warnings():  # kmock 0.8 uses the deprecated importlib.resources.read_binary
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resources.load_bundled()
        for key, info in _kube.extra_resources().items():
            self.resources[key] = info

    # -- test hooks ------------------------------------------------------------------------------

    def write_requests(self, since: int = 0) -> list[RequestRecord]:
        """The POST/PUT/PATCH/DELETE records of :attr:`request_log` from index ``since`` on."""
        return [record for record in self.request_log[since:] if record.method in WRITE_METHODS]

    def inject_failure(self, method: str, plural: str, *, status: int = 500, times: int = 1,
                       subresource: str | None = None) -> None:
        """Answer the next ``times`` matching requests with a ``Status`` error ``status``, changing nothing.

        ``method`` is an HTTP method, ``plural`` a resource plural (``"statefulsets"``). With
        ``subresource=None`` only requests to the object itself match; ``"status"`` matches
        ``.../status``; ``"*"`` matches both. ``GET`` matches get, list and watch alike.
        Safe to call from another thread.
        """
        with self._injections_lock:
            self._injections.append(_Injection(method.upper(), plural, subresource, status, times))

    def _raise_injected_failure(self, request: rendering.Request) -> None:
        assert request.resource is not None
        with self._injections_lock:
            for injection in self._injections:
                if (injection.remaining > 0 and injection.method == str(request.method.value).upper()
                        and injection.plural == request.resource.plural
                        and injection.subresource in ("*", request.subresource)):
                    injection.remaining -= 1
                    self._injections = [i for i in self._injections if i.remaining > 0]
                    raise error(injection.status, f"injected failure: {injection.method} {injection.plural}",
                                 name=request.name or "", kind=injection.plural)

    async def close_watches(self) -> None:
        """End every open WATCH stream (so that a server can stop without waiting for clients)."""
        for bus in list(self._buses.values()):
            await bus.put(_STOP)

    # -- request entry points --------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Serve one HTTP request and record it in :attr:`request_log`."""
        content_type = raw_request.headers.get("Content-Type")
        record = RequestRecord(
            method=raw_request.method.upper(), path=raw_request.path, query=raw_request.query_string,
            content_type=content_type.split(";")[0].strip().lower() if content_type else None, status=0,
            user_agent=raw_request.headers.get("User-Agent", ""),
        )
        self.request_log.append(record)
        self._in_flight[id(raw_request)] = record
        try:
            response = await super().__call__(raw_request)
            record.status = response.status
            return response
        except BaseException:
            record.status = record.status or 500
            raise
        finally:
            self._in_flight.pop(id(raw_request), None)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # Replaces KubernetesEmulator._handle: our own state changes, then kmock's reaction dispatch.
        outcome: Outcome | None = None
        try:
            if request.resource is not None and request.resource.plural:
                self._raise_injected_failure(request)
                outcome = await asyncio.shield(self._mutate(request))
                if outcome is not None:
                    self._outcomes[id(request)] = outcome
            try:
                response = await super(kmock.KubernetesEmulator, self)._handle(request)
            except rendering.StreamingError as exc:
                if isinstance(exc.__cause__, kmock.KubernetesError) and not exc.args[0].prepared:
                    raise exc.__cause__ from None
                raise
        except kmock.KubernetesError as exc:
            return _status_response(exc)
        finally:
            self._outcomes.pop(id(request), None)
        if outcome is not None and outcome.created and response.status == 200 and not response.prepared:
            response.set_status(201)
        return response

    def _has_outcome(self, request: rendering.Request) -> bool:
        return id(request) in self._outcomes

    def _serve_outcome(self, request: rendering.Request) -> rendering.Payload:
        return self._outcomes[id(request)].body

    # -- reading -----------------------------------------------------------------------------------

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        res, _ = self._resource_of(request)
        key = (res, request.namespace, str(request.name))
        async with self._lock:
            obj = self._live(key)
            printing = self._printing(request, res)
        if obj is None:
            raise self._not_found(key)  # with the apiserver's message: configmaps "x" not found
        if printing is not None:
            return printing([obj], (obj.get("metadata") or {}).get("resourceVersion"))
        return obj

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        res, info = self._resource_of(request)
        selector = self._selector(request)
        async with self._lock:
            items = [obj.raw for key, obj in self._objects.items()
                     if key[0] == res and not obj.deleted and self._visible(request, obj.raw, selector)]
            printing = self._printing(request, res)
            body = self._list_body(res, info, items)
        if printing is not None:
            return printing(items, body["metadata"]["resourceVersion"])
        return body

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        res, _ = self._resource_of(request)
        selector = self._selector(request)
        version = request.params.get("resourceVersion") or ""
        since = int(version) if version.isdigit() and int(version) > 0 else None
        try:
            timeout = float(request.params.get("timeoutSeconds") or 0)
        except ValueError as exc:
            raise error(400, f"invalid timeoutSeconds: {exc}") from exc
        bus = self._buses[res]
        initial: list[dict[str, Any]]
        async with self._lock:
            printing = self._printing(request, res)
            marker = await bus.mark()
            if since is None:
                initial = [{"type": "ADDED", "object": obj.raw} for key, obj in self._objects.items()
                           if key[0] == res and not obj.deleted]
            elif isinstance(bus, RecordingBus) and since < bus.dropped_upto:
                initial = [{"type": "ERROR", "object": {
                    "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
                    "reason": "Expired", "metadata": {},
                    "message": f"too old resource version: {since} ({bus.dropped_upto})"}}]
            else:
                history = bus.history if isinstance(bus, RecordingBus) else []
                initial = [event for seq, event in history if seq > since]
        try:
            yield b""  # send the headers now, even if no event ever comes
            if (record := self._in_flight.get(id(request._raw_request))) is not None:
                record.status = 200
            for event in initial:
                if event["type"] == "ERROR":
                    yield event
                    return
                if self._visible(request, event["object"], selector):
                    yield _as_table_event(event, printing)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout if timeout > 0 else None
            stream = bus.stream(since=marker)
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return
                try:
                    event = await asyncio.wait_for(anext(stream), remaining)
                except TimeoutError:
                    return
                if event is _STOP:
                    return
                if self._visible(request, event["object"], selector):
                    yield _as_table_event(event, printing)
        finally:
            with contextlib.suppress(ValueError):
                await bus.unmark(marker)

    def _printing(self, request: rendering.Request, res: kmock.resource) -> _Printer | None:
        """How to render objects as the ``Table`` that the request's Accept header asks for (call under the lock).

        ``None`` when the request wants plain objects; raises 400 on a bad ``includeObject``.
        """
        version = _tables.table_version(request.headers.get("Accept"))
        if version is None:
            return None
        include = request.params.get("includeObject") or None
        if include not in (None, *_tables.INCLUDE_OBJECT):
            raise error(400, f"includeObject: Unsupported value: {include!r}: supported values: "
                             f"{', '.join(repr(v) for v in _tables.INCLUDE_OBJECT)}")
        columns = _tables.columns_for(str(res.group or ""), str(res.plural), str(res.version),
                                      self._crd_of(res))

        def render(objects: list[dict[str, Any]], resource_version: str | None) -> dict[str, Any]:
            """A Table of ``objects`` with the negotiated columns and version."""
            return _tables.build_table(objects, columns, version=version, include_object=include,
                                       resource_version=resource_version)

        return render

    def _crd_of(self, res: kmock.resource) -> dict[str, Any] | None:
        """The live CustomResourceDefinition that declares ``res`` (any version), if any."""
        for key, obj in self._objects.items():
            if key[0] != CRD_RESOURCE or obj.deleted:
                continue
            spec = obj.raw.get("spec") or {}
            if spec.get("group") == res.group and (spec.get("names") or {}).get("plural") == res.plural:
                return dict(obj.raw)
        return None

    # -- discovery fixes -----------------------------------------------------------------------------

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_version(request)
        if isinstance(payload, dict):
            if payload.get("groupVersion") == "/v1":
                payload["groupVersion"] = "v1"  # kmock reports "/v1" for the core group
            for entry in payload.get("resources") or []:
                if "/" in entry.get("name", ""):  # kmock copies names and verbs into subresources
                    entry.update(singularName="", shortNames=[], categories=[], verbs=["get", "patch", "update"])
        return payload

    async def _serve_apis(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_apis(request)
        if isinstance(payload, dict):
            for group in payload.get("groups") or []:
                _kube.sort_group_versions(group)  # kmock picks a random "preferred" version
        return payload

    async def _serve_group(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_group(request)
        if isinstance(payload, dict):
            _kube.sort_group_versions(payload)
        return payload

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_server_version(request)
        if isinstance(payload, dict):
            major, minor, *_ = self.kubernetes_version.lstrip("v").split(".")
            payload.update(major=major, minor=minor, gitVersion=self.kubernetes_version)
        return payload


class EmulatorServer:
    """An :class:`Emulator` served over HTTP from a background thread with its own event loop.

    Usage: ``with EmulatorServer(host="127.0.0.1", port=0) as srv: ...`` then point clients at
    ``srv.url``. Port 0 picks a free port. Talk to ``srv.emulator`` from the test thread only for
    thread-safe things (``request_log``, ``write_requests``, ``inject_failure``, reading objects).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._emulator: Emulator | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._running = False

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:43219`` (only while running)."""
        if not self._running:
            raise RuntimeError("the emulator server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def emulator(self) -> Emulator:
        """The served :class:`Emulator` (from start on; still readable after :meth:`stop`)."""
        if self._emulator is None:
            raise RuntimeError("the emulator server was not started")
        return self._emulator

    def start(self, timeout: float = 30.0) -> EmulatorServer:
        """Start serving; return once the port is listening (raise if it could not start)."""
        if self._thread is not None:
            raise RuntimeError("the emulator server was already started")
        self._thread = threading.Thread(target=self._run, name="k8s-api-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the emulator server did not start within {timeout} s")
        if self._failure is not None:
            raise RuntimeError("the emulator server failed to start") from self._failure
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End the open watches, close the port and join the thread (idempotent)."""
        loop, stop_event, thread = self._loop, self._stop_event, self._thread
        if loop is not None and stop_event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may close between the check and the call
                loop.call_soon_threadsafe(stop_event.set)
        if thread is not None:
            thread.join(timeout)
        self._running = False

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        emulator = Emulator()
        async with emulator:
            server = aiohttp.web.Server(emulator, handler_cancellation=True)
            runner = aiohttp.web.ServerRunner(server, shutdown_timeout=1.0)
            await runner.setup()
            try:
                site = aiohttp.web.TCPSite(runner, self.host, self.port)
                await site.start()
                self.port = int(runner.addresses[0][1])
                self._emulator = emulator
                self._running = True
                self._ready.set()
                await self._stop_event.wait()
                await emulator.close_watches()
            finally:
                await runner.cleanup()


def write_kubeconfig(path: pathlib.Path, server_url: str, namespace: str = "default") -> None:
    """Write a kubeconfig with one cluster, user (no credentials) and current context for ``server_url``."""
    name = "glm-emulator"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server_url}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Serve the emulator until SIGTERM/SIGINT; print ``listening on URL`` once ready."""
    parser = argparse.ArgumentParser(prog="python -m glm_operator.devcluster.emulator",
                                     description="Serve a local Kubernetes API emulator.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", type=pathlib.Path, help="also write a kubeconfig for the server here")
    parser.add_argument("--namespace", default="default", help="the kubeconfig's namespace")
    args = parser.parse_args(argv)

    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    with EmulatorServer(host=args.host, port=args.port) as srv:
        if args.kubeconfig is not None:
            write_kubeconfig(args.kubeconfig, srv.url, args.namespace)
        print(f"listening on {srv.url}", flush=True)
        while not stopping.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
