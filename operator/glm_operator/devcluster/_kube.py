"""Pure Kubernetes API semantics for the emulator: selectors, merge-patch, versions, CRD names.

No I/O and no event loop here; :mod:`glm_operator.devcluster.emulator` applies these to its store.
kmock 0.8 is used only for its ``resource`` and ``ResourceInfo`` value types.
"""

from __future__ import annotations

import copy
import datetime
import re
import secrets
from collections.abc import Mapping
from typing import Any, Final

import attrs
import kmock

#: The verbs the emulator serves for every resource it declares itself.
ALL_VERBS: Final = frozenset({
    "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
})

#: Kubernetes ``Status.reason`` values by HTTP code (``metav1.StatusReason``).
STATUS_REASONS: Final = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

# The alphabet of apiserver's generateName suffixes (k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3).
_SUFFIX_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_KEY: Final = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_REQUIREMENT: Final = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQUALITY_REQUIREMENT: Final = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_REQUIREMENT: Final = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_FIELD_REQUIREMENT: Final = re.compile(r"^\s*([^=!\s]+)\s*(==|!=|=)\s*(.*?)\s*$")
_VERSION: Final = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def now() -> str:
    """Return the current UTC time in the apiserver's timestamp format (``2026-11-29T14:57:00Z``)."""
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def name_suffix(length: int = 5) -> str:
    """Return a random ``generateName`` suffix like the apiserver's (lowercase consonants and digits)."""
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge-patch: dicts merge recursively, ``None`` deletes, all else replaces.

    Used for merge-patch, strategic-merge-patch (without its list directives) and server-side
    apply (without field managers). Lists are replaced, not merged. Returns a new structure.
    """
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@attrs.frozen
class _Requirement:
    key: str
    operator: str  # one of: exists, !exists, =, !=, in, notin
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        """Whether ``labels`` satisfy this one requirement."""
        present = self.key in labels
        value = str(labels[self.key]) if present else None
        match self.operator:
            case "exists":
                return present
            case "!exists":
                return not present
            case "=" | "in":
                return present and value in self.values
            case _:  # "!=" and "notin" also match objects without the key, as in Kubernetes
                return not present or value not in self.values


def _split_requirements(text: str) -> list[str]:
    """Split a selector at top-level commas (commas inside ``in (a,b)`` sets stay)."""
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


@attrs.frozen
class Selector:
    """A parsed ``labelSelector`` plus ``fieldSelector`` of a LIST, WATCH or DELETE-collection request.

    Labels: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``, comma-joined.
    Fields: ``path=v``, ``path==v``, ``path!=v`` on any dotted path (``metadata.name``, ``status.phase``).
    """

    labels: tuple[_Requirement, ...] = ()
    fields: tuple[tuple[str, bool, str], ...] = ()  # (dotted path, equal?, value)

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None) -> Selector:
        """Parse both selectors; raise ``ValueError`` with a readable message on a malformed one."""
        labels: list[_Requirement] = []
        for part in _split_requirements(label_selector or ""):
            if match := _SET_REQUIREMENT.match(part):
                values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
                labels.append(_Requirement(match.group(1), match.group(2), values))
            elif match := _EQUALITY_REQUIREMENT.match(part):
                operator = "!=" if match.group(2) == "!=" else "="
                labels.append(_Requirement(match.group(1), operator, frozenset({match.group(3)})))
            elif match := _EXISTS_REQUIREMENT.match(part):
                labels.append(_Requirement(match.group(2), "!exists" if match.group(1) else "exists"))
            else:
                raise ValueError(f"unable to parse requirement {part.strip()!r} of labelSelector")
        fields: list[tuple[str, bool, str]] = []
        for part in _split_requirements(field_selector or ""):
            if not (match := _FIELD_REQUIREMENT.match(part)):
                raise ValueError(f"unable to parse requirement {part.strip()!r} of fieldSelector")
            fields.append((match.group(1), match.group(2) != "!=", match.group(3)))
        return cls(tuple(labels), tuple(fields))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether an object (a raw dict) satisfies every label and field requirement."""
        metadata = obj.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if not all(requirement.matches(labels) for requirement in self.labels):
            return False
        for path, equal, value in self.fields:
            found: Any = obj
            for step in path.split("."):
                found = found.get(step) if isinstance(found, Mapping) else None
            actual = "" if found is None else str(found).lower() if isinstance(found, bool) else str(found)
            if (actual == value) != equal:
                return False
        return True


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key of API versions, highest priority first: ``v2, v1, v1beta2, v1beta1, v1alpha1, other``."""
    match = _VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    stage_rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (stage_rank, -int(major), -int(minor or 0), version)


def sort_group_versions(group: dict[str, Any]) -> None:
    """Order an ``APIGroup``'s versions by priority and make the first one preferred (in place)."""
    versions = sorted(group.get("versions") or [], key=lambda v: version_priority(str(v.get("version"))))
    if versions:
        group["versions"] = versions
        group["preferredVersion"] = dict(versions[0])


def crd_resources(crd: Mapping[str, Any] | None) -> dict[kmock.resource, kmock.ResourceInfo]:
    """The resources (one per served version) that a ``CustomResourceDefinition`` declares."""
    spec = (crd or {}).get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not group or not plural or not kind:
        return {}
    result: dict[kmock.resource, kmock.ResourceInfo] = {}
    for version in spec.get("versions") or []:
        if not version.get("name") or not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        result[kmock.resource(group, version["name"], plural)] = kmock.ResourceInfo(
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            kind=kind,
            singular=names.get("singular") or kind.lower(),
            verbs=ALL_VERBS,
            shortnames=names.get("shortNames") or [],
            categories=names.get("categories") or [],
            subresources={"status"} if subresources.get("status") is not None else set(),
        )
    return result


def crd_status(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The status the apiextensions controller gives an accepted CRD (Established, NamesAccepted)."""
    spec = crd.get("spec") or {}
    stamp = now()
    return {
        "acceptedNames": copy.deepcopy(spec.get("names") or {}),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": stamp},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": stamp},
        ],
        "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
    }


def extra_resources() -> dict[str, kmock.ResourceInfo]:
    """Custom resources our operator writes, declared without their CRDs (fresh objects per call)."""
    return {
        "inference.networking.k8s.io/v1/inferencepools": kmock.ResourceInfo(
            namespaced=True, kind="InferencePool", singular="inferencepool", verbs=ALL_VERBS,
            subresources={"status"},
        ),
        "gateway.networking.k8s.io/v1/httproutes": kmock.ResourceInfo(
            namespaced=True, kind="HTTPRoute", singular="httproute", verbs=ALL_VERBS, subresources={"status"},
        ),
        "monitoring.coreos.com/v1/podmonitors": kmock.ResourceInfo(
            namespaced=True, kind="PodMonitor", singular="podmonitor", verbs=ALL_VERBS, shortnames={"pmon"},
        ),
    }
