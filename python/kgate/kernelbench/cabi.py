"""Calling a kgate C-ABI library (include/kgate/abi.h: `kgate_run(const kgate_call*)`) on numpy arrays from
Python, through ctypes. It lets one compiled kernel be judged two ways, as a KernelBench-format numpy
candidate (`python -m kgate audit`) and as a native kernel (`kgate verify --kernel lib.so`), so a test can
check the two front-ends agree gate by gate (tests/python/test_kernelbench_parity.py)."""
from __future__ import annotations

import ctypes

import numpy as np

ABI_VERSION = 1
_CODES = {"f": 2, "i": 0, "u": 1, "b": 6}  # DLPack kDLFloat, kDLInt, kDLUInt, kDLBool


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class KgateCall(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_int32), ("n_inputs", ctypes.c_int32), ("n_outputs", ctypes.c_int32),
                ("n_attrs", ctypes.c_int32), ("inputs", ctypes.POINTER(DLTensor)),
                ("outputs", ctypes.POINTER(DLTensor)), ("attrs", ctypes.c_void_p), ("stream", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("message_capacity", ctypes.c_size_t)]


def _tensor(a: np.ndarray, keep: list) -> DLTensor:
    shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
    strides = (ctypes.c_int64 * max(1, a.ndim))(*[s // a.itemsize for s in a.strides])
    keep += [shape, strides]
    dt = DLDataType(_CODES[a.dtype.kind], 8 * a.itemsize if a.dtype.kind != "b" else 8, 1)
    return DLTensor(a.ctypes.data, DLDevice(1, 0), a.ndim, dt, shape, strides, 0)


class Kernel:
    def __init__(self, path: str, symbol: str = "kgate_run"):
        self.lib = ctypes.CDLL(path)
        self.fn = getattr(self.lib, symbol)
        self.fn.restype = ctypes.c_int32
        self.fn.argtypes = [ctypes.POINTER(KgateCall)]

    def __call__(self, inputs: list, outputs: list) -> tuple[int, str]:
        keep: list = []
        ins = (DLTensor * max(1, len(inputs)))(*[_tensor(a, keep) for a in inputs])
        outs = (DLTensor * max(1, len(outputs)))(*[_tensor(a, keep) for a in outputs])
        msg = ctypes.create_string_buffer(512)
        call = KgateCall(ABI_VERSION, len(inputs), len(outputs), 0, ins, outs, None, None,
                         ctypes.cast(msg, ctypes.c_char_p), len(msg))
        status = int(self.fn(ctypes.byref(call)))
        return status, msg.value.decode(errors="replace")
