"""Decide whether a live object still matches what the operator rendered.

A live object matches when every field the operator sets has the same value (a *subset* test):
fields the API server or other controllers add (defaults, ``status``, ``managedFields``) do not
count as drift, while any field the operator owns that was changed or removed by hand does.
"""

from __future__ import annotations

from typing import Any


def is_subset(desired: Any, live: Any) -> bool:
    """True when ``desired`` is contained in ``live``.

    Dicts: every key of ``desired`` is in ``live`` with a contained value. Lists: same length and
    element-wise contained (order matters, as for containers, args and env). Scalars: equal
    (``True`` is not ``1``). Removed keys are invisible to this test; the applied-hash annotation
    on every child catches them.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and is_subset(v, live[k]) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(is_subset(d, v) for d, v in zip(desired, live, strict=True))
        )
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    return bool(desired == live)


def object_key(obj: dict[str, Any]) -> tuple[str, str, str]:
    """``(apiVersion, kind, name)`` of an object."""
    return obj["apiVersion"], obj["kind"], obj["metadata"]["name"]
