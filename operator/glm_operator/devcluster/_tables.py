"""Server-side printing for the emulator: ``meta.k8s.io`` ``Table`` answers, as ``kubectl get`` asks for.

Pure functions, no I/O: :func:`table_version` reads an ``Accept`` header, :func:`columns_for` picks the
columns of a resource (a CRD's ``additionalPrinterColumns``, or Name/Age plus a few built-in ones),
:func:`build_table` renders objects into a ``Table``. :func:`jsonpath_find` evaluates the JSONPath
subset that printer columns use, :func:`human_duration` formats ages like the apiserver
(``k8s.io/apimachinery/pkg/util/duration.HumanDuration``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

#: The ``meta.k8s.io`` versions of ``Table`` the emulator can answer with.
TABLE_VERSIONS: Final = ("v1", "v1beta1")
#: The ``includeObject`` values of ``TableOptions`` (``Metadata`` is the default).
INCLUDE_OBJECT: Final = ("None", "Metadata", "Object")

_NAME_DESCRIPTION: Final = ("Name must be unique within a namespace. Is required when creating resources, "
                            "although some resources may allow a client to request the generation of an "
                            "appropriate name automatically.")
_AGE_DESCRIPTION: Final = ("CreationTimestamp is a timestamp representing the server time when this object "
                           "was created. Represented in RFC3339 form and is in UTC.")

Cell = Callable[[Mapping[str, Any], datetime.datetime], Any]


# -- Accept header ---------------------------------------------------------------------------------


def table_version(accept: str | None) -> str | None:
    """The ``Table`` version (``v1``/``v1beta1``) that an ``Accept`` header asks for first, or ``None``.

    Media ranges are taken in order: the first ``application/json;as=Table;g=meta.k8s.io;v=V`` with a
    supported ``V`` wins; a plain JSON (or wildcard) range before it means a plain answer. Ranges the
    emulator cannot serve (protobuf, other ``as=`` kinds or versions) are skipped.
    """
    for media_range in (accept or "").split(","):
        mime, *raw_params = (part.strip() for part in media_range.split(";"))
        params = {key.strip().lower(): value.strip() for key, _, value in (p.partition("=") for p in raw_params)}
        if mime.lower() not in ("application/json", "application/*", "*/*"):
            continue
        if "as" not in params:
            return None
        if (params["as"] == "Table" and params.get("g") == "meta.k8s.io"
                and params.get("v") in TABLE_VERSIONS):
            return params["v"]
    return None


# -- JSONPath subset -------------------------------------------------------------------------------


@attrs.frozen
class _Field:
    name: str  # "*" for every value of a mapping or list


@attrs.frozen
class _Index:
    index: int


@attrs.frozen
class _Filter:
    path: tuple[_Field | _Index, ...]  # relative to @
    equal: bool
    value: str | int | float | bool | None


_Step = _Field | _Index | _Filter


def _parse_literal(text: str) -> str | int | float | bool | None:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"unsupported JSONPath filter value {text!r}") from None


def _parse_filter(expression: str) -> _Filter:
    for operator in ("==", "!="):
        left, found, right = expression.partition(operator)
        if found:
            break
    else:
        raise ValueError(f"unsupported JSONPath filter {expression!r}: only @.path == / != value")
    left = left.strip()
    if not left.startswith("@"):
        raise ValueError(f"a JSONPath filter must compare @.path, not {left!r}")
    path = parse_jsonpath(left[1:])
    if any(isinstance(step, _Filter) or step == _Field("*") for step in path):
        raise ValueError(f"unsupported JSONPath filter path {left!r}")
    return _Filter(path=tuple(s for s in path if not isinstance(s, _Filter)), equal=found == "==",
                   value=_parse_literal(right))


def parse_jsonpath(path: str) -> tuple[_Step, ...]:
    """Parse the JSONPath subset of printer columns into steps; raise ``ValueError`` on anything else.

    Supported: an optional ``{...}`` wrapper and leading ``$``; ``.field`` (``\\.`` escapes a dot in a
    name, ``.*`` is every value); ``[n]`` (negative from the end); ``[*]``; ``['key']``/``["key"]``;
    and ``[?(@.a.b == "value")]`` / ``!=`` filters over a list's elements.
    """
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[_Step] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == ".":
            name = ""
            i += 1
            while i < len(text) and text[i] not in ".[":
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                name += text[i]
                i += 1
            if not name:
                raise ValueError(f"empty field name in JSONPath {path!r}")
            steps.append(_Field(name))
        elif char == "[":
            if text.startswith("[?(", i):
                end = text.find(")]", i)
                if end < 0:
                    raise ValueError(f"unterminated filter in JSONPath {path!r}")
                steps.append(_parse_filter(text[i + 3:end]))
                i = end + 2
                continue
            end = text.find("]", i)
            if end < 0:
                raise ValueError(f"unterminated [ in JSONPath {path!r}")
            inner = text[i + 1:end].strip()
            i = end + 1
            if inner == "*":
                steps.append(_Field("*"))
            elif len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "\"'":
                steps.append(_Field(inner[1:-1]))
            else:
                try:
                    steps.append(_Index(int(inner)))
                except ValueError:
                    raise ValueError(f"unsupported subscript [{inner}] in JSONPath {path!r}") from None
        else:
            raise ValueError(f"unexpected {char!r} at offset {i} of JSONPath {path!r}")
    return tuple(steps)


def _matches(value: Any, step: _Filter) -> bool:
    found = _evaluate([value], step.path)
    if not found:
        return False
    actual, wanted = found[0], step.value
    same_kind = isinstance(actual, bool) == isinstance(wanted, bool) and (
        type(actual) is type(wanted) or (isinstance(actual, int | float) and isinstance(wanted, int | float)))
    return (same_kind and actual == wanted) == step.equal


def _evaluate(current: list[Any], steps: Sequence[_Step]) -> list[Any]:
    for step in steps:
        found: list[Any] = []
        for value in current:
            if isinstance(step, _Field):
                if step.name == "*":
                    found.extend(value.values() if isinstance(value, Mapping)
                                 else value if isinstance(value, list) else [])
                elif isinstance(value, Mapping) and step.name in value:
                    found.append(value[step.name])
            elif isinstance(step, _Index):
                if isinstance(value, list) and -len(value) <= step.index < len(value):
                    found.append(value[step.index])
            elif isinstance(value, list):
                found.extend(item for item in value if _matches(item, step))
        current = found
    return current


def jsonpath_find(obj: Any, path: str) -> list[Any]:
    """Every value that ``path`` (see :func:`parse_jsonpath`) selects in ``obj``; ``[]`` when missing.

    Example: ``jsonpath_find(obj, '.status.conditions[?(@.type=="Ready")].status')`` is ``["True"]``
    for an object with a Ready condition. Raises ``ValueError`` on a path outside the subset.
    """
    return _evaluate([obj], parse_jsonpath(path))


# -- ages --------------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """Format a duration as kubectl does (``5s``, ``3m12s``, ``15m``, ``5h3m``, ``2d``, ``3y45d``).

    A port of apimachinery's ``duration.HumanDuration``: about two significant figures,
    ``0s`` for up to a second in the future, ``<invalid>`` beyond.
    """
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def parse_timestamp(value: str) -> datetime.datetime:
    """Parse an RFC 3339 timestamp (``2026-11-29T14:57:00Z``, fractions and offsets too) as aware UTC."""
    parsed = datetime.datetime.fromisoformat(value.strip().replace("z", "Z"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {value!r}")
    return parsed.astimezone(datetime.UTC)


def age(timestamp: Any, now: datetime.datetime) -> str:
    """The age cell of a timestamp at ``now``: ``<unknown>`` when absent, ``<invalid>`` when unparseable."""
    if not timestamp:
        return "<unknown>"
    if not isinstance(timestamp, str):
        return "<invalid>"
    try:
        created = parse_timestamp(timestamp)
    except ValueError:
        return "<invalid>"
    return human_duration((now - created).total_seconds())


# -- columns -----------------------------------------------------------------------------------------


@attrs.frozen
class Column:
    """One ``TableColumnDefinition`` and how to compute its cell from an object at a time ``now``."""

    name: str
    type: str
    cell: Cell = attrs.field(eq=False, repr=False)
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        """The column's ``TableColumnDefinition`` as JSON."""
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def _string_of(value: Any) -> str:
    """How kubectl's JSONPath printer writes a value: strings as is, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def cell_value(column_type: str, value: Any, now: datetime.datetime) -> Any:
    """A custom-column cell as the apiserver computes it (``cellForJSONValue``): ``None`` if it does not fit.

    ``string`` prints any value; ``integer``, ``number`` and ``boolean`` keep values of their type;
    ``date`` turns a timestamp into an age like ``3m12s``.
    """
    if value is None:
        return None
    match column_type:
        case "string":
            return _string_of(value)
        case "integer" if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
        case "number" if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        case "boolean" if isinstance(value, bool):
            return value
        case "date" if isinstance(value, str):
            return age(value, now)
    return None


def _jsonpath_cell(column_type: str, path: str) -> Cell:
    try:
        steps = parse_jsonpath(path)
    except ValueError:
        return lambda obj, now: None

    def cell(obj: Mapping[str, Any], now: datetime.datetime) -> Any:
        """The column's cell for ``obj`` (``None`` when the path finds nothing)."""
        found = _evaluate([obj], steps)
        return cell_value(column_type, found[0], now) if found else None

    return cell


def _name_cell(obj: Mapping[str, Any], now: datetime.datetime) -> Any:
    return (obj.get("metadata") or {}).get("name") or ""


def _age_cell(obj: Mapping[str, Any], now: datetime.datetime) -> Any:
    return age((obj.get("metadata") or {}).get("creationTimestamp"), now)


def _int_at(obj: Mapping[str, Any], section: str, field: str, default: int = 0) -> int:
    value = (obj.get(section) or {}).get(field)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


def _ready_cell(obj: Mapping[str, Any], now: datetime.datetime) -> Any:
    return f"{_int_at(obj, 'status', 'readyReplicas')}/{_int_at(obj, 'spec', 'replicas', 1)}"


def _containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    pod_spec = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
    return [c for c in pod_spec.get("containers") or [] if isinstance(c, Mapping)]


def _containers_cell(obj: Mapping[str, Any], now: datetime.datetime) -> Any:
    return ",".join(str(c.get("name", "")) for c in _containers(obj))


def _images_cell(obj: Mapping[str, Any], now: datetime.datetime) -> Any:
    return ",".join(str(c.get("image", "")) for c in _containers(obj))


NAME_COLUMN: Final = Column("Name", "string", _name_cell, _NAME_DESCRIPTION, format="name")
AGE_COLUMN: Final = Column("Age", "string", _age_cell, _AGE_DESCRIPTION)
_READY: Final = Column("Ready", "string", _ready_cell, "Number of the pod with ready state")
_CONTAINERS: Final = Column("Containers", "string", _containers_cell, "Names of each container in the template.",
                            priority=1)
_IMAGES: Final = Column("Images", "string", _images_cell, "Images referenced by each container in the template.",
                        priority=1)
_BUILTIN_COLUMNS: Final[dict[tuple[str, str], tuple[Column, ...]]] = {
    ("apps", "statefulsets"): (NAME_COLUMN, _READY, AGE_COLUMN, _CONTAINERS, _IMAGES),
    ("apps", "deployments"): (
        NAME_COLUMN, _READY,
        Column("Up-to-date", "integer", lambda obj, now: _int_at(obj, "status", "updatedReplicas"),
               "Total number of non-terminated pods targeted by this deployment that have the desired template "
               "spec."),
        Column("Available", "integer", lambda obj, now: _int_at(obj, "status", "availableReplicas"),
               "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        AGE_COLUMN, _CONTAINERS, _IMAGES,
    ),
}


def crd_columns(crd: Mapping[str, Any], version: str) -> tuple[Column, ...]:
    """The columns of a CRD's served ``version``: Name, then its ``additionalPrinterColumns`` (default: Age).

    Per-version columns (``apiextensions.k8s.io/v1``) win over top-level ones (``v1beta1``).
    """
    spec = crd.get("spec") or {}
    declared: list[Any] = list(spec.get("additionalPrinterColumns") or [])
    for entry in spec.get("versions") or []:
        if isinstance(entry, Mapping) and entry.get("name") == version and entry.get("additionalPrinterColumns"):
            declared = list(entry["additionalPrinterColumns"])
    if not declared:
        declared = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
                     "description": _AGE_DESCRIPTION}]
    columns = [NAME_COLUMN]
    for entry in declared:
        if not isinstance(entry, Mapping) or not entry.get("name"):
            continue
        column_type, path = str(entry.get("type") or "string"), str(entry.get("jsonPath") or "")
        columns.append(Column(
            name=str(entry["name"]), type=column_type, cell=_jsonpath_cell(column_type, path),
            description=str(entry.get("description")
                            or f"Custom resource definition column (in JSONPath format): {path}"),
            priority=int(entry.get("priority") or 0), format=str(entry.get("format") or ""),
        ))
    return tuple(columns)


def columns_for(group: str, plural: str, version: str, crd: Mapping[str, Any] | None) -> tuple[Column, ...]:
    """The columns of a resource: its CRD's (if ``crd`` is given), else built-in ones, else Name and Age."""
    if crd is not None:
        return crd_columns(crd, version)
    return _BUILTIN_COLUMNS.get((group, plural), (NAME_COLUMN, AGE_COLUMN))


# -- tables ------------------------------------------------------------------------------------------


def build_table(objects: Sequence[Mapping[str, Any]], columns: Sequence[Column], *, version: str = "v1",
                include_object: str | None = None, resource_version: str | None = None,
                now: datetime.datetime | None = None) -> dict[str, Any]:
    """A ``meta.k8s.io/<version>`` ``Table`` with one row per object.

    ``include_object`` (``TableOptions.includeObject``): ``Metadata`` (the default) gives each row a
    ``PartialObjectMetadata``, ``Object`` the full object, ``None`` nothing. Raises ``ValueError`` on
    another value or version.
    """
    include = include_object or "Metadata"
    if include not in INCLUDE_OBJECT:
        raise ValueError(f"includeObject: Unsupported value: {include!r}: supported values: "
                         f"{', '.join(repr(v) for v in INCLUDE_OBJECT)}")
    if version not in TABLE_VERSIONS:
        raise ValueError(f"unsupported Table version meta.k8s.io/{version}")
    moment = now or datetime.datetime.now(tz=datetime.UTC)
    api_version = f"meta.k8s.io/{version}"
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [column.cell(obj, moment) for column in columns]}
        if include == "Object":
            row["object"] = obj
        elif include == "Metadata":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": api_version,
                             "metadata": obj.get("metadata") or {}}
        rows.append(row)
    metadata = {"resourceVersion": resource_version} if resource_version else {}
    return {"kind": "Table", "apiVersion": api_version, "metadata": metadata,
            "columnDefinitions": [column.definition() for column in columns], "rows": rows}
