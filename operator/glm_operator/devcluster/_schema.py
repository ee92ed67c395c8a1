"""Structural-schema pruning and defaulting of custom resources, as kube-apiserver applies them.

A real apiserver passes every custom resource it decodes (create, update, every kind of patch,
server-side apply, writes to ``/status``) through its CRD's structural schema, in this order
(``apiextensions-apiserver``: ``pruning.PruneWithOptions``, then
``defaulting.PruneNonNullableNullsWithoutDefaults``, then ``defaulting.Default``, then the
``ObjectMeta`` coercion):

1. :func:`prune`: fields the schema does not declare are dropped, unless the node (or an
   ancestor up to the next declared node) has ``x-kubernetes-preserve-unknown-fields: true``; the
   resource root (and every ``x-kubernetes-embedded-resource`` node) keeps ``apiVersion``, ``kind``
   and ``metadata`` without looking into them;
2. :func:`drop_nulls`: ``null`` values of declared fields that are neither ``nullable`` nor
   defaulted are dropped;
3. :func:`apply_defaults`: in every object node present in the data, an absent (or non-nullable
   ``null``) property with a ``default`` gets a copy of it, and defaulting goes on inside present
   objects, array items and the defaults just applied;
4. ``metadata`` keeps only ``ObjectMeta`` fields (:data:`OBJECT_META_FIELDS`).

No validation: types, formats, enums, patterns, ``required`` and CEL rules are not checked, and no
value is converted (an ``x-kubernetes-int-or-string`` node keeps ints and strings as sent).
``patternProperties``, which a real apiserver refuses in a CRD, is honoured leniently here: a key
that matches a pattern is treated as declared by that pattern's schema.

Every public function is pure: it returns a new structure and leaves its arguments alone.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

import kmock

#: The fields of ``metav1.ObjectMeta``: what ``metadata`` of a custom resource keeps.
OBJECT_META_FIELDS: Final = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})

_META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
_PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
_EMBEDDED: Final = "x-kubernetes-embedded-resource"

Schema = Mapping[str, Any]


def crd_schemas(crd: Mapping[str, Any] | None) -> dict[kmock.resource, Schema]:
    """The ``openAPIV3Schema`` of each served version of a ``CustomResourceDefinition``, by resource.

    Versions without a schema are left out (their objects are stored as sent), and so is every
    version of a CRD with the legacy ``spec.preserveUnknownFields: true``.
    """
    spec = (crd or {}).get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not group or not plural or not kind or spec.get("preserveUnknownFields"):
        return {}
    result: dict[kmock.resource, Schema] = {}
    for version in spec.get("versions") or []:
        if not version.get("name") or not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, Mapping):
            result[kmock.resource(group, version["name"], plural)] = schema
    return result


def prune(value: Any, schema: Schema | None, *, resource_root: bool = False) -> Any:
    """Return a copy of ``value`` without the fields that ``schema`` does not declare.

    Objects under ``x-kubernetes-preserve-unknown-fields: true`` keep their unknown fields (declared
    ones are still pruned inside); an object node without a schema loses all its fields, scalars
    are always kept. With ``resource_root`` (as for a whole custom resource) ``apiVersion``,
    ``kind`` and ``metadata`` are kept as they are, whatever the schema says.
    """
    result = copy.deepcopy(value)
    if resource_root:
        schema = {**(schema or {}), _EMBEDDED: True}
    _prune(result, schema)
    return result


def drop_nulls(value: Any, schema: Schema | None) -> Any:
    """Return a copy of ``value`` without ``null`` fields whose schema is neither nullable nor defaulted.

    Fields the schema does not declare keep their nulls; nulls that have a default are left for
    :func:`apply_defaults` to replace.
    """
    result = copy.deepcopy(value)
    _drop_nulls(result, schema)
    return result


def apply_defaults(value: Any, schema: Schema | None) -> Any:
    """Return a copy of ``value`` with the schema's defaults filled in (structural defaulting).

    In every object present in ``value``, each property with a ``default`` that is absent, or
    ``null`` without ``nullable: true``, gets a copy of the default; then defaulting continues into
    every declared property (including a default just applied) and into array items. Objects that
    are absent stay absent: their properties' defaults apply only once they are sent.
    """
    result = copy.deepcopy(value)
    _default(result, schema)
    return result


def coerce(obj: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """A whole custom resource as the apiserver stores it: pruned, nulls dropped, defaulted, metadata coerced."""
    result: dict[str, Any] = prune(dict(obj), schema, resource_root=True)
    _drop_nulls(result, schema)
    _default(result, schema)
    _coerce_metadata(result, schema, root=True)
    return result


def coerce_field(obj: Mapping[str, Any], schema: Schema, field: str = "status") -> dict[str, Any]:
    """``obj`` with only its top-level ``field`` (``status`` for the status subresource) coerced.

    Everything else is returned as it is; a ``field`` that ends up empty of data stays absent (or
    gets the root schema's default for it, as on the apiserver).
    """
    result = copy.deepcopy(dict(obj))
    partial = coerce({field: result[field]} if field in result else {}, schema)
    if field in partial:
        result[field] = partial[field]
    else:
        result.pop(field, None)
    return result


# -- the algorithms, in place ---------------------------------------------------------------------


def _declared(schema: Schema | None, key: str) -> tuple[bool, Schema | None]:
    """Whether ``schema`` declares the field ``key``, and the field's schema (None: "no schema")."""
    if schema is None:
        return False, None
    properties = schema.get("properties") or {}
    if key in properties:
        sub = properties[key]
        return True, sub if isinstance(sub, Mapping) else None
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        return True, additional
    if additional is True:
        return True, None
    for pattern, sub in (schema.get("patternProperties") or {}).items():
        try:
            matched = re.search(pattern, key) is not None
        except re.error:
            continue
        if matched:
            return True, sub if isinstance(sub, Mapping) else None
    return False, None


def _items(schema: Schema | None) -> Schema | None:
    items = None if schema is None else schema.get("items")
    return items if isinstance(items, Mapping) else None


def _prune(value: Any, schema: Schema | None) -> None:
    if schema is not None and schema.get(_PRESERVE):
        _skip_prune(value, schema)
        return
    if isinstance(value, dict):
        if schema is None:
            value.clear()
            return
        for key in list(value):
            if schema.get(_EMBEDDED) and key in _META_FIELDS:
                continue
            declared, sub = _declared(schema, key)
            if declared:
                _prune(value[key], sub)
            else:
                del value[key]
    elif isinstance(value, list):
        for item in value:
            _prune(item, _items(schema))


def _skip_prune(value: Any, schema: Schema | None) -> None:
    """Prune under ``x-kubernetes-preserve-unknown-fields``: keep unknown fields, prune declared ones."""
    if schema is None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if schema.get(_EMBEDDED) and key in _META_FIELDS:
                continue
            declared, sub = _declared(schema, key)
            if declared:
                _prune(item, sub)
    elif isinstance(value, list):
        for item in value:
            _skip_prune(item, _items(schema))


def _drop_nulls(value: Any, schema: Schema | None) -> None:
    if isinstance(value, dict):
        for key in list(value):
            _, sub = _declared(schema, key)
            if value[key] is None and sub is not None and not sub.get("nullable") and sub.get("default") is None:
                del value[key]
            else:
                _drop_nulls(value[key], sub)
    elif isinstance(value, list):
        for item in value:
            _drop_nulls(item, _items(schema))


def _non_nullable_null(value: Any, schema: Schema | None) -> bool:
    return value is None and schema is not None and not schema.get("nullable")


def _default(value: Any, schema: Schema | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, sub in properties.items():
            if not isinstance(sub, Mapping) or sub.get("default") is None:
                continue
            if key not in value or _non_nullable_null(value[key], sub):
                value[key] = copy.deepcopy(sub["default"])
        for key in list(value):
            declared, sub = _declared(schema, key)
            if not declared or sub is None:
                continue
            if key not in properties and _non_nullable_null(value[key], sub):
                value[key] = copy.deepcopy(sub.get("default"))
            _default(value[key], sub)
    elif isinstance(value, list):
        items = _items(schema)
        if items is None:
            return
        for index, item in enumerate(value):
            if _non_nullable_null(item, items):
                value[index] = copy.deepcopy(items.get("default"))
            _default(value[index], items)


def _coerce_metadata(value: Any, schema: Schema | None, *, root: bool = False) -> None:
    """Keep only ObjectMeta fields in the ``metadata`` of the resource and of its embedded resources."""
    if isinstance(value, dict):
        if (root or (schema is not None and schema.get(_EMBEDDED))) and isinstance(value.get("metadata"), dict):
            metadata = value["metadata"]
            for key in [key for key in metadata if key not in OBJECT_META_FIELDS]:
                del metadata[key]
        if schema is None:
            return
        for key, item in value.items():
            if key == "metadata" and (root or schema.get(_EMBEDDED)):
                continue
            declared, sub = _declared(schema, key)
            if declared and sub is not None:
                _coerce_metadata(item, sub)
    elif isinstance(value, list):
        for item in value:
            _coerce_metadata(item, _items(schema))
