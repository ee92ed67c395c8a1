"""Deterministic YAML/JSON output of rendered objects (sorted keys, block style, no timestamps)."""

from __future__ import annotations

import json
from typing import Any

import yaml


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream, one document per object, keys sorted."""
    return yaml.safe_dump_all(objects, sort_keys=True, default_flow_style=False, width=120, explicit_start=True)


def to_json(objects: list[dict[str, Any]]) -> str:
    """A ``v1`` ``List`` of the objects as indented JSON with sorted keys (``kubectl apply -f`` accepts it)."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2, sort_keys=True) + "\n"
