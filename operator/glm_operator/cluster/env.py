"""Operator settings from environment variables (the chart sets them from its values)."""

from __future__ import annotations

import os


def env_seconds(name: str, default: float) -> float:
    """``$name`` as a positive number of seconds, ``default`` when unset or empty.

    Raises:
        ValueError: set but not a positive number (names the variable, the value and an example).
    """
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{name}={raw!r} is not a positive number of seconds; unset it or use e.g. {default:g}")
    return value
