"""The Open Inference Protocol (KServe v2, as Triton and KServe speak it) over JSON: a request's
tensors to numpy arrays and numpy arrays back, checked before anything is allocated.

A tensor is {"name", "shape", "datatype", "data"}: data row-major, flat or nested. Every
mistake is a ProtocolError naming the input and what was expected; the server answers it
with a 400.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np

from fusebridge.errors import ArgumentError

# OIP datatypes <-> numpy. BYTES (strings) has no model input here to feed.
DATATYPES = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
}
_NAMES = {dtype: name for name, dtype in DATATYPES.items()}


class ProtocolError(ArgumentError):
    """A request the protocol cannot read, or whose tensors the model cannot take (HTTP 400)."""


def datatype(dtype: np.dtype) -> str:
    """The OIP name of a numpy dtype."""
    try:
        return _NAMES[np.dtype(dtype)]
    except KeyError:
        raise ArgumentError(f"no Open Inference Protocol datatype for {dtype}") from None


def parse_json(body: bytes) -> dict:
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the body is not JSON ({exc})") from None
    if not isinstance(request, dict):
        raise ProtocolError(f"the body is a JSON {type(request).__name__}, expected an object")
    return request


def _shape(tensor: Mapping, what: str) -> tuple[int, ...]:
    shape = tensor.get("shape")
    ok = isinstance(shape, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    )
    if not ok:
        raise ProtocolError(f"{what}: shape {shape!r}, expected a list of sizes >= 0")
    return tuple(shape)


def _values(data: object, dtype: np.dtype, size: int, what: str) -> np.ndarray:
    """data (flat or nested JSON numbers) as a flat array of dtype, exactly `size` of them."""
    if not isinstance(data, list):
        raise ProtocolError(f"{what}: data is {type(data).__name__}, expected a list")
    try:
        flat = np.asarray(data)
    except ValueError:  # ragged nesting
        raise ProtocolError(f"{what}: data is nested unevenly, expected row-major values") from None
    if flat.size != size:
        raise ProtocolError(f"{what}: {flat.size} values for its shape, expected {size}")
    flat = flat.reshape(-1)
    if size == 0:
        return flat.astype(dtype)
    kind = flat.dtype.kind
    if dtype.kind == "b":
        if kind != "b":
            raise ProtocolError(f"{what}: values of JSON type {flat.dtype}, expected true/false")
        return flat
    if kind not in "iuf" or (dtype.kind in "iu" and kind == "f"):
        expected = "integers" if dtype.kind in "iu" else "numbers"
        raise ProtocolError(f"{what}: values like {flat[0]!r}, expected {expected}")
    out = flat.astype(dtype)
    if dtype.kind in "iu" and not np.array_equal(out, flat):
        bad = flat[np.flatnonzero(out != flat)[0]]
        raise ProtocolError(f"{what}: value {bad} does not fit {datatype(dtype)}")
    if dtype.kind == "f" and not np.isfinite(out[np.isfinite(flat)]).all():
        raise ProtocolError(f"{what}: a value overflows {datatype(dtype)}")
    return out


def read_tensors(request: Mapping, dtypes: Mapping[str, np.dtype]) -> dict[str, np.ndarray]:
    """The request's inputs as arrays: exactly the names of `dtypes`, each of its datatype."""
    inputs = request.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(t, dict) for t in inputs):
        raise ProtocolError('the request has no "inputs": expected a list of tensor objects')
    out = {}
    for tensor in inputs:
        name = tensor.get("name")
        what = f"input {name!r}"
        if name not in dtypes:
            raise ProtocolError(f"{what}: not an input of the model, expected {sorted(dtypes)}")
        if name in out:
            raise ProtocolError(f"{what}: given twice")
        expected = datatype(dtypes[name])
        if tensor.get("datatype") != expected:
            raise ProtocolError(f"{what}: datatype {tensor.get('datatype')!r}, expected {expected}")
        shape = _shape(tensor, what)
        out[name] = _values(tensor.get("data"), dtypes[name], math.prod(shape), what).reshape(shape)
    missing = sorted(set(dtypes) - set(out))
    if missing:
        raise ProtocolError(f"the request lacks inputs {missing}; the model's are {sorted(dtypes)}")
    return out


def requested_outputs(request: Mapping, names: list[str]) -> list[str]:
    """The outputs the request asks for ("outputs": [{"name"}]); all when it names none."""
    asked = request.get("outputs")
    if asked is None:
        return names
    if not isinstance(asked, list) or not all(isinstance(t, dict) for t in asked):
        raise ProtocolError('"outputs" must be a list of {"name": ...} objects')
    wanted = [t.get("name") for t in asked]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ProtocolError(f"outputs {unknown} are not outputs of the model, expected {names}")
    return [n for n in names if n in wanted]


def tensor(name: str, value: np.ndarray) -> dict:
    """One output tensor of a response."""
    return {
        "name": name,
        "datatype": datatype(value.dtype),
        "shape": list(value.shape),
        "data": value.reshape(-1).tolist(),
    }
