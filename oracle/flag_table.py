"""Write the flag table of the vLLM release installed in this venv: every option of `vllm serve`.

Usage (inside .oracle/vllm-<release>; `make flag-tables` does it):
    python oracle/flag_table.py > operator/glm_operator/plan/vllm_flags/<release>.json
Each entry: option strings, dest, value type, choices, nargs, whether it takes a value, its --no- form, deprecated.
"""

from __future__ import annotations

import argparse
import json
import sys

import vllm_env
from torch_stub import is_stub


def _type_name(action: argparse.Action) -> str | None:
    kind = action.type
    if kind is None:
        return None
    name = getattr(kind, "__name__", None) or type(kind).__name__
    if name == "<lambda>":
        name = "callable"
    if name in {"_optional_type", "_parse_type"} and getattr(kind, "__closure__", None):
        inner = [getattr(c.cell_contents, "__name__", None) for c in kind.__closure__]  # type: ignore[union-attr]
        inner = [i for i in inner if i]
        if inner:
            return f"{'optional' if name == '_optional_type' else 'parse'}:{inner[0]}"
    return name


def table() -> dict[str, object]:
    top = vllm_env.serve_parser()
    serve = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices["serve"]
    deprecated = getattr(serve, "_deprecated", set())
    flags = []
    positionals = []
    for action in serve._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        for value in (action.choices or [], action.nargs, action.type):
            if is_stub(value) or any(is_stub(c) for c in (action.choices or [])):
                raise SystemExit(f"{action.option_strings}: a value computed by the torch stand-in; fix the stub")
        if not action.option_strings:
            positionals.append({"dest": action.dest, "nargs": action.nargs})
            continue
        takes_value = action.nargs != 0
        flags.append({
            "options": sorted(action.option_strings, key=lambda o: (not o.startswith("--"), o)),
            "dest": action.dest,
            "type": _type_name(action),
            "choices": sorted(str(c) for c in action.choices) if action.choices is not None else None,
            "nargs": action.nargs if action.nargs is None or isinstance(action.nargs, int | str) else str(action.nargs),
            "takes_value": takes_value,
            "deprecated": action in deprecated,
        })
    flags.sort(key=lambda f: f["options"][0])
    return {
        "vllm": vllm_env.VLLM_VERSION,
        "generator": "oracle/flag_table.py: the vllm serve parser (make_arg_parser), torch stubbed (torch_stub.py)",
        "allow_abbrev": serve.allow_abbrev,
        "positionals": positionals,
        "flags": flags,
    }


if __name__ == "__main__":
    json.dump(table(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
