"""vLLM command-line flags in ``extraArgs``: how vLLM's parser reads them, and their values."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Short aliases of flags that :func:`rendered_flags` may own (vLLM ``arg_utils.py``).
ALIASES: dict[str, str] = {"-O": "--compilation-config", "-ac": "--attention-config"}


def normalize_flag(arg: str) -> str:
    """The flag name of one ``extraArgs`` entry as vLLM's parser sees it: text before ``=`` or a
    space, without a ``.sub.key`` suffix (vLLM's dotted JSON-config syntax), underscores as dashes,
    a ``--no-`` negation reduced to the flag itself, short aliases expanded."""
    flag = re.split(r"[=\s]", arg.strip(), maxsplit=1)[0]
    flag = flag.split(".", 1)[0] if flag.startswith("-") else flag
    if flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-").lower()
        flag = flag.removeprefix("--no-")
        flag = flag if flag.startswith("-") else "--" + flag
    return ALIASES.get(flag, flag)


def extra_arg_value(args: Sequence[str], flag: str) -> tuple[int, str] | None:
    """The last value given to ``flag`` (canonical ``--long-name``) in ``args``, as ``(index, value)``.

    Accepts ``--flag=value`` and ``--flag value`` (two entries), in any spelling :func:`normalize_flag`
    accepts; ``None`` when the flag is absent. A flag without a value yields ``(index, "")``.
    """
    found = None
    for i, arg in enumerate(args):
        if not arg.startswith("-") or normalize_flag(arg) != flag:
            continue
        head, sep, value = arg.strip().partition("=")
        if not sep and " " in head:
            value = head.split(None, 1)[1]
        elif not sep:
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else ""
        found = (i, value.strip())
    return found


#: Suffixes of vLLM's ``human_readable_int`` (``vllm/engine/arg_utils.py``): lower case decimal,
#: upper case binary (``25.6k`` = 25,600; ``25K`` = 25,600 = 25 × 1,024).
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(value: str) -> int:
    """Parse a size as vLLM's ``human_readable_int`` does (``10G`` = 10 GiB, ``10g`` = 10 GB).

    Raises:
        ValueError: not a number with an optional k/m/g/t or K/M/G/T suffix.
    """
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)", value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a size such as 10737418240, 10G (GiB) or 10g (GB)")
    number, suffix = match.groups()
    if "." in number and not suffix:
        raise ValueError(f"{value!r}: a size without a suffix must be a whole number of bytes (vLLM uses int())")
    scale = _DECIMAL.get(suffix) or _BINARY.get(suffix) or 1
    if suffix in _BINARY and "." in number:
        raise ValueError(f"{value!r}: binary suffixes take whole numbers (vLLM)")
    return int(float(number) * scale)
