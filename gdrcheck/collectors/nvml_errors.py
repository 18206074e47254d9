"""NVML's error codes by name, and an exception as a JSON-able record: shared by the NVML collectors."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CODE_NAMES = {
    1: "Uninitialized", 2: "InvalidArgument", 3: "NotSupported", 4: "NoPermission", 6: "NotFound",
    8: "InsufficientPower", 9: "DriverNotLoaded", 10: "Timeout", 11: "IrqIssue", 12: "LibraryNotFound",
    13: "FunctionNotFound", 14: "CorruptedInforom", 15: "GpuIsLost", 16: "ResetRequired", 17: "OperatingSystem",
    18: "LibRmVersionMismatch", 20: "Memory", 999: "Unknown",
}


def error_doc(e: BaseException) -> dict[str, Any]:
    """A JSON-able description of an NVML (or any) exception."""
    cls = type(e).__name__
    code = getattr(e, "value", None)
    if cls.startswith("NVMLError_"):
        name = cls[len("NVMLError_"):]
    elif isinstance(code, int) and code in CODE_NAMES:
        name = CODE_NAMES[code]
    else:
        name = cls
    try:
        msg = str(e)
    except Exception:  # noqa: BLE001 - NVMLError.__str__ calls into the library
        msg = ""
    return {"error": name, "code": code if isinstance(code, int) else None, "message": msg or name}
