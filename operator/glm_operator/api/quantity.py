"""Kubernetes resource quantities for memory sizes (``512Gi``, ``64G``, ``1073741824``).

Only the subset of the Kubernetes quantity grammar that makes sense for byte sizes is accepted:
a non-negative decimal number with an optional binary (``Ki`` … ``Ei``) or decimal (``k`` … ``E``)
suffix. Source: ``k8s.io/apimachinery/pkg/api/resource/quantity.go``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

#: Pattern used both by the pydantic model and in the generated CRD (``pattern:``).
MEMORY_QUANTITY_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?([eE][0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
#: CPU quantities: whole cores or millicores (``32``, ``500m``, ``1.5``).
CPU_QUANTITY_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?m?$"

_MULTIPLIERS: Final = {
    "": 1,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}
_SPLIT = re.compile(r"^(?P<num>[0-9]+(?:\.[0-9]+)?)(?:[eE](?P<exp>[0-9]+)|(?P<suffix>[A-Za-z]*))$")

GIB: Final = 2**30


class QuantityError(ValueError):
    """Raised when a string is not a memory quantity; the message says what is accepted."""


def parse_bytes(value: str | int) -> int:
    """Parse a memory quantity into bytes (rounded up to a whole byte).

    ``"512Gi"`` → 549755813888; ``"64G"`` → 64000000000; ``1024`` → 1024.

    Raises:
        QuantityError: if ``value`` does not match :data:`MEMORY_QUANTITY_PATTERN`.
    """
    text = str(value).strip()
    match = _SPLIT.match(text)
    if match is None or (match["exp"] is None and match["suffix"] not in _MULTIPLIERS):
        raise QuantityError(
            f"{value!r} is not a Kubernetes memory quantity; write a number with an optional "
            "binary suffix such as '512Gi', '64Gi' or '1Ti'"
        )
    try:
        multiplier = 10 ** int(match["exp"]) if match["exp"] is not None else _MULTIPLIERS[match["suffix"]]
        amount = Decimal(match["num"]) * multiplier
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"{value!r} is not a number") from exc
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))


def format_bytes(n_bytes: int) -> str:
    """Format bytes in the canonical form the Kubernetes API server stores, so rendered manifests
    compare equal to the live objects read back.

    A whole number of KiB uses the largest exact binary suffix (549755813888 → ``"512Gi"``);
    otherwise the largest exact decimal suffix (10**9 → ``"1G"``, 1500000000 → ``"1500M"``), or
    plain bytes.
    """
    if n_bytes < 0:
        raise QuantityError(f"negative size {n_bytes}")
    suffixes = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki") if n_bytes % 1024 == 0 else ("E", "P", "T", "G", "M", "k")
    for suffix in suffixes:
        unit = _MULTIPLIERS[suffix]
        if n_bytes >= unit and n_bytes % unit == 0:
            return f"{n_bytes // unit}{suffix}"
    return str(n_bytes)


def canonical_cpu(value: str) -> str:
    """A CPU quantity in the form the API server stores: whole cores as ``"32"``, fractions as
    millicores (``"0.5"`` → ``"500m"``, ``"1500m"`` → ``"1500m"``, ``"2000m"`` → ``"2"``).

    Rendering the canonical form keeps live objects equal to rendered ones (no perpetual drift).

    Raises:
        QuantityError: if ``value`` is not a CPU quantity.
    """
    match = re.match(r"^(?P<num>[0-9]+(?:\.[0-9]+)?)(?P<milli>m?)$", value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a CPU quantity; write cores such as '32' or millicores such as '500m'")
    millis = Decimal(match["num"]) * (1 if match["milli"] else 1000)
    millis = millis.to_integral_value(rounding="ROUND_CEILING")
    return str(int(millis) // 1000) if millis % 1000 == 0 else f"{int(millis)}m"
