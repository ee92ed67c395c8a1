"""Kernel tests. Without a GPU, Triton kernels run under Triton's interpreter: TRITON_INTERPRET=1 must be set
before triton is first imported, so it is set here, before any test module imports glm_kernels.triton_kernels."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
