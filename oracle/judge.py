"""Judge engine command lines with this venv's vLLM: read JSON ``[{"name": ..., "args": [...], "gpu": "H200"}]`` on
stdin, write ``[{"name": ..., "ok": bool, "error": str | null}]`` on stdout.

Each command line goes through ``vllm serve``'s parser and ``validate_parsed_serve_args`` (see vllm_env.py for
what the torch stand-in allows and what it does not).
"""

from __future__ import annotations

import json
import sys

import vllm_env


def judge(case: dict[str, object]) -> dict[str, object]:
    args = [str(a) for a in case["args"]]  # type: ignore[attr-defined]
    try:
        vllm_env.parse_serve(args)
    except (vllm_env.ParseError, ValueError, TypeError) as exc:
        return {"name": case["name"], "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"name": case["name"], "ok": True, "error": None}


if __name__ == "__main__":
    cases = json.load(sys.stdin)
    json.dump({"vllm": vllm_env.VLLM_VERSION, "results": [judge(c) for c in cases]}, sys.stdout)
