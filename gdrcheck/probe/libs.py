"""Loading the node's own libraries (in a worker process only).

``GDRCHECK_PROBE_LIBS=module`` makes :func:`load` ask ``module.load(soname)`` instead of
``ctypes.CDLL``: the tests put scripted libraries at exactly this boundary.
"""

from __future__ import annotations

import ctypes
import importlib
import os


class LibraryMissing(Exception):
    pass


def load(soname: str, use_errno: bool = False):
    fake = os.environ.get("GDRCHECK_PROBE_LIBS")
    if fake:
        lib = importlib.import_module(fake).load(soname)
        if lib is None:
            raise LibraryMissing(f"{soname}: cannot open shared object file: No such file or directory")
        return lib
    first = None
    for path in (soname, *fallbacks(soname)):
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL, use_errno=use_errno)
        except OSError as e:
            first = first or e
    raise LibraryMissing(str(first))


def fallbacks(soname: str):
    """Where a library lives off the loader's path: the CUDA toolkit, or NVIDIA's wheel (nvidia-cufile)."""
    import glob
    import sys

    if soname != "libcufile.so.0":
        return []
    out = ["/usr/local/cuda/lib64/libcufile.so.0"]
    for base in sys.path:
        out.extend(sorted(glob.glob(os.path.join(base or ".", "nvidia", "cu*", "lib", "libcufile.so.0"))))
    return [p for p in out if os.path.exists(p)]


def bind(lib, name: str, restype, *argtypes, optional: bool = False):
    """One function with its declared return and argument types (an undeclared pointer is cut to 32 bits)."""
    try:
        f = getattr(lib, name)
    except AttributeError:
        if optional:
            return None
        raise
    try:
        f.restype = restype
        f.argtypes = list(argtypes)
    except (AttributeError, TypeError):  # a scripted stand-in
        pass
    return f
