"""The object store behind the emulator: creates, patches, replaces, deletes, GC and CRDs.

Custom resources of a CRD with a schema are pruned and defaulted on every write (:mod:`._schema`).

:class:`StoreEmulator` extends kmock 0.8's ``KubernetesEmulator`` (pinned: it uses the private
``_objects``, ``_resources``, ``_lock`` and ``_buses`` fields and ``kmock._internal.aiobus``);
:class:`glm_operator.devcluster.emulator.Emulator` adds the HTTP side on top of it.
"""

from __future__ import annotations

import collections
import copy
import uuid
from collections.abc import Callable
from typing import Any, Final

import attrs
import jsonpatch
import jsonpointer
import kmock
import yaml
from kmock._internal import aiobus, rendering

from glm_operator.devcluster import _kube, _schema

CRD_RESOURCE: Final = kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_APPLY_PATCH: Final = "application/apply-patch+yaml"
_HISTORY_LIMIT: Final = 100_000  # watch events kept per resource for ?resourceVersion= replays
_IMMUTABLE_METADATA: Final = (
    "name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation",
)

Key = tuple[kmock.resource, str | None, str]


@attrs.frozen
class Outcome:
    """What a write request stored (or would store): the answer's body, and whether it created it."""

    body: dict[str, Any]
    created: bool = False


@attrs.mutable(weakref_slot=True)
class RecordingBus(aiobus.Bus[Any]):
    """kmock's event bus plus a ``(seq, event)`` history, seq = the object's resourceVersion."""

    last_seq: Callable[[], int] = attrs.field(kw_only=True)
    history: list[tuple[int, Any]] = attrs.field(init=False, factory=list)
    dropped_upto: int = attrs.field(init=False, default=0)  # the newest seq no longer in the history

    async def put(self, *items: Any) -> None:
        """Publish events; dict events are also appended to the history (under the bus's condition)."""
        async with self._condition:
            for item in items:
                if isinstance(item, dict):
                    version = (item.get("object") or {}).get("metadata", {}).get("resourceVersion")
                    seq = int(version) if str(version).isdigit() else self.last_seq()
                    self.history.append((seq, item))
            if len(self.history) > _HISTORY_LIMIT:
                self.dropped_upto = self.history[-_HISTORY_LIMIT - 1][0]
                del self.history[:-_HISTORY_LIMIT]
            self._buffer.extend(items)
            self._condition.notify_all()
            self._streamed_count += len(items)
        await self._flush()


def error(status: int, message: str, *, reason: str | None = None, **details: Any) -> kmock.KubernetesError:
    """A kmock error that the emulator renders as a Kubernetes ``Status`` with this code."""
    return kmock.KubernetesError(status=status, reason=reason or _kube.STATUS_REASONS.get(status),
                                 message=message, details=details or None)


def group_version(res: kmock.resource) -> str:
    """The ``apiVersion`` of a resource: ``apps/v1``, or ``v1`` for the core group."""
    return f"{res.group}/{res.version}" if res.group else str(res.version)


@attrs.define(kw_only=True)
class StoreEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with apiserver write semantics; :meth:`_mutate` applies one write request."""

    _last_rv: int = attrs.field(default=999, init=False)
    #: The structural schema of each custom resource declared by a live CRD (see :mod:`._schema`).
    _schemas: dict[kmock.resource, _schema.Schema] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._buses = collections.defaultdict(lambda: RecordingBus(last_seq=lambda: self._last_rv))

    def _get_resources(self) -> list[kmock.resource]:
        # Declared resources plus those of live objects (kmock also counts deleted objects, so an
        # undeclared CRD's resource would stay discoverable).
        result = set(super(kmock.KubernetesEmulator, self)._get_resources())
        result.update(key[0] for key, obj in self._objects.items() if not obj.deleted)
        return list(result)

    # -- state changes (all under self._lock) ----------------------------------------------------

    async def _mutate(self, request: rendering.Request) -> Outcome | None:
        method = str(request.method.value).upper()
        if method not in WRITE_METHODS:
            return None
        async with self._lock:
            if method == "POST":
                return await self._create(request) if request.name is None else None
            if request.name is None:
                return await self._delete_collection(request) if method == "DELETE" else None
            if method == "PUT":
                return await self._replace(request)
            if method == "PATCH":
                return await self._patch(request)
            return await self._delete(request)

    async def _create(self, request: rendering.Request) -> Outcome:
        res, info = self._resource_of(request)
        body = self._body_dict(request)
        metadata = body["metadata"]
        namespace = self._namespace_for_create(request, info, metadata.get("namespace"))
        name = metadata.get("name") or ""
        if not name and not metadata.get("generateName"):
            raise error(422, "metadata.name: Required value: name or generateName is required")
        while not name or (not metadata.get("name") and self._live((res, namespace, name)) is not None):
            name = f"{metadata['generateName']}{_kube.name_suffix()}"
        if self._live((res, namespace, name)) is not None:
            raise error(409, f'{self._kind_name(res)} "{name}" already exists',
                        reason="AlreadyExists", name=name, kind=res.plural)
        obj = self._coerce(res, None, self._stamp_new(res, info, namespace, name, body))
        if request.params.get("dryRun") != "All":
            await self._store_new((res, namespace, name), obj)
        return Outcome(obj, created=True)

    async def _patch(self, request: rendering.Request) -> Outcome:
        res, info = self._resource_of(request)
        key, sub = self._key_of(request, info)
        content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        is_apply = content_type == _APPLY_PATCH
        body = self._body_dict(request) if is_apply else copy.deepcopy(request.data)
        current = self._live(key)
        if current is None:
            if not is_apply or sub is not None:
                raise self._not_found(key)
            if body["metadata"].get("name") not in (None, "", key[2]):
                raise error(400, "the name of the object does not match the name on the URL")
            obj = self._coerce(res, None, self._stamp_new(res, info, key[1], key[2], body))
            if request.params.get("dryRun") != "All":
                await self._store_new(key, obj)
            return Outcome(obj, created=True)
        if isinstance(body, dict):
            self._check_precondition(body, current)
            patched = _kube.merge_patch(copy.deepcopy(current), body)
        elif isinstance(body, list):
            try:
                patched = jsonpatch.apply_patch(copy.deepcopy(current), body, in_place=False)
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException,
                    KeyError, TypeError) as exc:
                raise error(422, f"the JSON patch could not be applied: {exc}") from exc
        else:
            raise error(400, f"unsupported patch body for content type {content_type!r}")
        if not isinstance(patched, dict):
            raise error(422, "the patch does not result in an object")
        new = self._coerce(res, sub, self._restrict(res, sub, current, patched))
        if request.params.get("dryRun") == "All":
            return Outcome(new)
        return Outcome(await self._commit(key, sub, current, new))

    async def _replace(self, request: rendering.Request) -> Outcome:
        res, info = self._resource_of(request)
        key, sub = self._key_of(request, info)
        current = self._live(key)
        if current is None:
            raise self._not_found(key)
        body = self._body_dict(request)
        if body["metadata"].get("name") not in (None, "", key[2]):
            raise error(400, "the name of the object does not match the name on the URL")
        self._check_precondition(body, current)
        new = self._coerce(res, sub, self._restrict(res, sub, current, body))
        if request.params.get("dryRun") == "All":
            return Outcome(new)
        return Outcome(await self._commit(key, sub, current, new))

    async def _delete(self, request: rendering.Request) -> Outcome:
        _, info = self._resource_of(request)
        key, sub = self._key_of(request, info)
        current = self._live(key)
        if current is None or sub is not None:
            raise self._not_found(key)
        options = request.data if isinstance(request.data, dict) else {}
        preconditions = options.get("preconditions") or {}
        metadata = current.get("metadata") or {}
        for field in ("uid", "resourceVersion"):
            if preconditions.get(field) and preconditions[field] != metadata.get(field):
                raise error(409, f"Precondition failed: {field} in precondition: {preconditions[field]}, "
                                  f"{field} in object meta: {metadata.get(field)}")
        if request.params.get("dryRun") == "All":
            return Outcome(current)
        return Outcome(await self._delete_object(key, current))

    async def _delete_collection(self, request: rendering.Request) -> Outcome:
        res, info = self._resource_of(request)
        selector = self._selector(request)
        deleted = []
        for key, obj in list(self._objects.items()):
            live = key[0] == res and request.namespace in (None, key[1]) and not obj.deleted
            if live and selector.matches(obj.raw):
                deleted.append(await self._delete_object(key, obj.raw))
        return Outcome(self._list_body(res, info, deleted))

    async def _delete_object(self, key: Key, current: dict[str, Any]) -> dict[str, Any]:
        metadata = current.get("metadata") or {}
        if not metadata.get("finalizers"):
            return await self._remove(key, copy.deepcopy(current))
        if metadata.get("deletionTimestamp"):
            return current
        new = copy.deepcopy(current)
        new["metadata"].update(deletionTimestamp=_kube.now(), deletionGracePeriodSeconds=0,
                               resourceVersion=self._next_rv())
        self._objects[key].history.append(new)
        await self._emit(key[0], "MODIFIED", new)
        return new

    async def _remove(self, key: Key, final: dict[str, Any]) -> dict[str, Any]:
        """Really delete: DELETED event, CRD undeclaration, then the GC's cascade to dependents."""
        final.setdefault("metadata", {})["resourceVersion"] = self._next_rv()
        self._objects[key].history.append(final)
        self._objects[key].delete()
        await self._emit(key[0], "DELETED", final)
        if key[0] == CRD_RESOURCE:
            await self._undeclare_crd(final)
        if uid := final["metadata"].get("uid"):
            await self._collect_garbage(uid)
        return final

    async def _collect_garbage(self, owner_uid: str) -> None:
        """Delete the dependents of a removed owner whose owners are all gone (background cascade)."""
        live = [obj.raw for obj in self._objects.values() if not obj.deleted]
        live_uids = {raw.get("metadata", {}).get("uid") for raw in live}
        for key, obj in list(self._objects.items()):
            current = None if obj.deleted else obj.raw
            references = (current or {}).get("metadata", {}).get("ownerReferences") or []
            owners = {ref.get("uid") for ref in references if isinstance(ref, dict)}
            if current is not None and owner_uid in owners and not owners & live_uids:
                await self._delete_object(key, current)

    async def _commit(self, key: Key, sub: str | None,
                      old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Store an update unless it changes nothing; bump resourceVersion (and generation on spec)."""
        metadata, old_metadata = new["metadata"], old.get("metadata") or {}
        if sub is None and new.get("spec") != old.get("spec"):
            metadata["generation"] = int(old_metadata.get("generation") or 0) + 1
        metadata.pop("resourceVersion", None)
        if "resourceVersion" in old_metadata:
            metadata["resourceVersion"] = old_metadata["resourceVersion"]
        if new == old:
            return old
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            return await self._remove(key, new)
        metadata["resourceVersion"] = self._next_rv()
        self._objects[key].history.append(new)
        await self._emit(key[0], "MODIFIED", new)
        if key[0] == CRD_RESOURCE:
            self._declare_crd(new, old)
        return new

    async def _store_new(self, key: Key, obj: dict[str, Any]) -> None:
        if key in self._objects:
            self._objects[key].history.append(obj)  # re-created after a deletion: one history
        else:
            self._objects[key] = obj
        await self._emit(key[0], "ADDED", obj)
        if key[0] == CRD_RESOURCE:
            self._declare_crd(obj, None)

    async def _emit(self, res: kmock.resource, event_type: str, obj: dict[str, Any]) -> None:
        await self._buses[res].put({"type": event_type, "object": obj})

    def _declare_crd(self, crd: dict[str, Any], old: dict[str, Any] | None) -> None:
        declared = _kube.crd_resources(crd)
        for res in _kube.crd_resources(old).keys() - declared.keys():
            if res in self._resources:
                del self._resources[res]
        for res, info in declared.items():
            self._resources[res] = info
        for res in _schema.crd_schemas(old):
            self._schemas.pop(res, None)
        self._schemas.update(_schema.crd_schemas(crd))

    async def _undeclare_crd(self, crd: dict[str, Any]) -> None:
        for res in _kube.crd_resources(crd):
            self._schemas.pop(res, None)
            if res in self._resources:
                del self._resources[res]
            for key, obj in list(self._objects.items()):
                if key[0] == res and not obj.deleted:
                    await self._remove(key, copy.deepcopy(obj.raw))

    # -- helpers -----------------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._last_rv += 1
        return str(self._last_rv)

    def _resource_of(self, request: rendering.Request) -> tuple[kmock.resource, kmock.ResourceInfo]:
        res = request.resource
        assert res is not None
        if res in self._resources:
            return res, self._resources[res]
        if any(key[0] == res and not obj.deleted for key, obj in self._objects.items()):
            return res, kmock.ResourceInfo()
        raise error(404, f"the server could not find the requested resource ({group_version(res)}, "
                          f"{res.plural}); declare it with a CRD or emulator.resources[...]")

    def _key_of(self, request: rendering.Request, info: kmock.ResourceInfo) -> tuple[Key, str | None]:
        assert request.resource is not None and request.name is not None
        sub = request.subresource
        if sub is not None and (sub != "status" or "status" not in info.subresources):
            raise error(404, f"the emulator does not serve {request.resource.plural}/{sub}")
        return (request.resource, request.namespace, request.name), sub

    def _live(self, key: Key) -> dict[str, Any] | None:
        if key in self._objects and not self._objects[key].deleted:
            return self._objects[key].raw
        return None

    def _kind_name(self, res: kmock.resource) -> str:
        return f"{res.plural}.{res.group}" if res.group else str(res.plural)

    def _not_found(self, key: Key) -> kmock.KubernetesError:
        return error(404, f'{self._kind_name(key[0])} "{key[2]}" not found', name=key[2], kind=key[0].plural)

    def _body_dict(self, request: rendering.Request) -> dict[str, Any]:
        data = request.data
        if data is None and request.text.strip():
            try:
                data = yaml.safe_load(request.text)  # server-side apply may send YAML
            except yaml.YAMLError as exc:
                raise error(400, f"the request body is neither JSON nor YAML: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("metadata", {}), dict):
            raise error(400, "the request body must be an object with an object metadata")
        body = copy.deepcopy(data)
        body.setdefault("metadata", {})
        return body

    def _namespace_for_create(self, request: rendering.Request, info: kmock.ResourceInfo,
                              body_namespace: str | None) -> str | None:
        if info.namespaced is False:
            return None
        if request.namespace and body_namespace and request.namespace != body_namespace:
            raise error(400, "the namespace of the provided object does not match the namespace "
                              "sent on the request")
        namespace = request.namespace or body_namespace
        if info.namespaced and not namespace:
            raise error(400, "the namespace is required for a namespaced resource")
        return namespace

    def _stamp_new(self, res: kmock.resource, info: kmock.ResourceInfo, namespace: str | None, name: str,
                   body: dict[str, Any]) -> dict[str, Any]:
        metadata = body["metadata"]
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "namespace"):
            metadata.pop(field, None)
        metadata["name"] = name
        if namespace:
            metadata["namespace"] = namespace
        metadata.update(uid=str(uuid.uuid4()), resourceVersion=self._next_rv(),
                        creationTimestamp=_kube.now(), generation=1)
        body.setdefault("apiVersion", group_version(res))
        body.setdefault("kind", info.kind or str(res.plural).capitalize())
        if "status" in info.subresources:
            body.pop("status", None)
        if res == CRD_RESOURCE:
            body["status"] = _kube.crd_status(body)
        return body

    def _coerce(self, res: kmock.resource, sub: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """Prune and default a custom resource by its CRD's schema (only ``.status`` for ``/status``).

        Objects of resources without a CRD schema (all built-ins) are returned unchanged.
        """
        schema = self._schemas.get(res)
        if schema is None:
            return obj
        if sub == "status":
            return _schema.coerce_field(obj, schema, "status")
        return _schema.coerce(obj, schema)

    def _restrict(self, res: kmock.resource, sub: str | None, old: dict[str, Any],
                  patched: dict[str, Any]) -> dict[str, Any]:
        """Keep what a write must not change: all but .status via /status, .status and identity otherwise."""
        if sub == "status":
            new = copy.deepcopy(old)
            if "status" in patched:
                new["status"] = patched["status"]
            else:
                new.pop("status", None)
            return new
        new = patched
        if not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        if res in self._resources and "status" in self._resources[res].subresources:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        old_metadata = old.get("metadata") or {}
        for field in _IMMUTABLE_METADATA:
            new["metadata"].pop(field, None)
            if field in old_metadata:
                new["metadata"][field] = old_metadata[field]
        for field in ("apiVersion", "kind"):
            if field in old:
                new[field] = old[field]
        return new

    def _check_precondition(self, body: dict[str, Any], current: dict[str, Any]) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != (current.get("metadata") or {}).get("resourceVersion"):
            raise error(409, "Operation cannot be fulfilled: the object has been modified; "
                              "please apply your changes to the latest version and try again")

    def _selector(self, request: rendering.Request) -> _kube.Selector:
        try:
            params = request.params
            return _kube.Selector.parse(params.get("labelSelector"), params.get("fieldSelector"))
        except ValueError as exc:
            raise error(400, str(exc)) from exc

    def _visible(self, request: rendering.Request, obj: dict[str, Any], selector: _kube.Selector) -> bool:
        metadata = obj.get("metadata") or {}
        return (request.namespace in (None, metadata.get("namespace"))
                and request.name in (None, metadata.get("name"))
                and selector.matches(obj))

    def _list_body(self, res: kmock.resource, info: kmock.ResourceInfo, items: list[Any]) -> dict[str, Any]:
        return {
            "apiVersion": group_version(res),
            "kind": f"{info.kind or str(res.plural).capitalize()}List",
            "metadata": {"resourceVersion": str(self._last_rv)},
            "items": items,
        }

