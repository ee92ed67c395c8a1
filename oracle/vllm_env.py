"""vLLM's own `vllm serve` parser, built inside ``.oracle/vllm-<release>`` on a fake CUDA platform.

Run only by the oracle scripts in that venv (``oracle/setup_venv.sh``), never by the operator.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
import torch_stub

torch_stub.install()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

from vllm import platforms  # noqa: E402
from vllm.platforms.cuda import CudaPlatformBase  # noqa: E402
from vllm.platforms.interface import DeviceCapability  # noqa: E402

#: GPU products the CRD knows → (compute capability, name, HBM bytes).
GPUS: dict[str, tuple[tuple[int, int], str, int]] = {
    "H200": ((9, 0), "NVIDIA H200", 141 * 10**9),
    "B200": ((10, 0), "NVIDIA B200", 180 * 10**9),
}


def fake_cuda(product: str = "H200", count: int = 8) -> CudaPlatformBase:
    capability, name, memory = GPUS[product]

    class FakeCuda(CudaPlatformBase):
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(*capability)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return memory

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return count

        @classmethod
        def log_warnings(cls) -> None:
            pass

    return FakeCuda()


platforms.current_platform = fake_cuda()

try:  # 0.32.0
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
except ModuleNotFoundError:  # 0.33.0 moved it
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
from vllm.version import __version__ as vllm_version  # noqa: E402

VLLM_VERSION: str = vllm_version


class ParseError(Exception):
    """vLLM's parser refused the command line (argparse's message)."""


class _Parser(FlexibleArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits; the oracle wants the message
        raise ParseError(message)


def serve_parser() -> FlexibleArgumentParser:
    """The parser of ``vllm serve`` as ``ServeSubcommand.subparser_init`` builds it (``make_arg_parser`` on the
    ``serve`` sub-parser of ``vllm/entrypoints/cli/main.py``; the sub-command module itself imports the HTTP
    server's request models, which need real torch)."""
    top = _Parser(description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser", parser_class=_Parser)
    make_arg_parser(subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]"))
    return top


def parse_serve(args: list[str]) -> argparse.Namespace:
    """Parse ``vllm serve ARGS`` and run ``validate_parsed_serve_args``, as ``vllm serve`` does before it starts."""
    namespace = serve_parser().parse_args(["serve", *args])
    if getattr(namespace, "model_tag", None) is not None:
        namespace.model = namespace.model_tag
    validate_parsed_serve_args(namespace)
    return namespace
