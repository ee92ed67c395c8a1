"""An inert stand-in for torch, triton and vLLM's compiled extension modules.

Why: vLLM's ``vllm serve`` parser is built from its config dataclasses, whose modules import torch. The only
torch 2.13.0 wheel the registry offers this machine (x86_64, CPython 3.11) is the CUDA build; it does not import
without ~2.2 GB of NVIDIA libraries, and the project must not download a CUDA torch. Nothing the parser records
(option strings, types, choices, nargs, deprecation) is computed by torch, so an inert module that answers every
attribute, call, operator and decorator is enough to *build* the parser and *parse* command lines. It is not
enough for anything that computes with tensors (``create_engine_config``'s memory checks, backend selection).

Only the oracle scripts (run inside ``.oracle/vllm-<release>``) install it; the operator never does.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

_classes: dict[str, type] = {}


def _self(self: Any, *args: Any, **kwargs: Any) -> Any:
    return self


def _instance(cls: type) -> Any:
    return object.__new__(cls)


_INSTANCE_DUNDERS: dict[str, Any] = {
    "__radd__": lambda self, other: other,
    "__add__": _self, "__mul__": _self, "__rmul__": _self, "__sub__": _self, "__truediv__": _self,
    "__floordiv__": _self, "__getitem__": _self, "__setitem__": lambda *a: None,
    "__iter__": lambda self: iter((_instance(_stub("item0")), _instance(_stub("item1")))),
    "__len__": lambda self: 0, "__bool__": lambda self: False, "__int__": lambda self: 0,
    "__index__": lambda self: 0, "__float__": lambda self: 0.0, "__str__": lambda self: "",
    "__enter__": _self, "__exit__": lambda *a: False,
    "__lt__": lambda s, o: False, "__gt__": lambda s, o: False, "__le__": lambda s, o: True,
    "__ge__": lambda s, o: True, "__hash__": id, "__eq__": lambda s, o: True, "__ne__": lambda s, o: False,
}


class StubMeta(type):
    """Classes that answer every attribute with another stub class; calling one makes an instance (or, called
    on a single function, returns it: decorator use)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _instance(cls)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__

    def __iter__(cls) -> Any:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __bool__(cls) -> bool:
        return False

    def __mul__(cls, other: Any) -> Any:
        return cls

    __rmul__ = __add__ = __radd__ = __sub__ = __rsub__ = __truediv__ = __floordiv__ = __mul__


def _stub(qualname: str) -> type:
    if qualname not in _classes:
        def getattr_(self: Any, name: str, _q: str = qualname) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return _stub(f"{_q}().{name}")

        def call(self: Any, *args: Any, _q: str = qualname, **kwargs: Any) -> Any:
            return _instance(_stub(f"{_q}()()"))

        _classes[qualname] = StubMeta(qualname.rsplit(".", 1)[-1], (), {
            "__module__": "torch", "__qualname__": qualname, "__getattr__": getattr_, "__call__": call,
            "__init_subclass__": classmethod(lambda c, **k: None), **_INSTANCE_DUNDERS,
        })
    return _classes[qualname]


def is_stub(value: Any) -> bool:
    """True for a stub class or instance (the flag-table writer refuses to record one)."""
    return isinstance(value, StubMeta) or isinstance(type(value), StubMeta)


class _Module(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        if fullname.startswith("vllm."):  # vLLM's compiled kernels (_C, _moe_C, _flashmla_C, …) load as empty
            real = importlib.machinery.PathFinder.find_spec(fullname, path)
            if real is not None and (real.origin or "").endswith(".so"):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        module.__version__ = "2.13.0"  # the torch the project pins
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install() -> None:
    """Answer ``import torch``/``triton`` and vLLM's compiled modules with stubs (call before importing vllm)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(frozenset({"torch", "triton"})))
