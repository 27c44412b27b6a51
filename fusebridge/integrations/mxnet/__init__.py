"""MXNet: symbol JSON + .params read without mxnet (load.py), written back with our ops in
them (save.py); `register()` builds and loads fusebridge's ops into a running MXNet
(op_library.py)."""

from fusebridge.integrations.mxnet.op_library import LIBRARY_NAME, register

__all__ = ["LIBRARY_NAME", "register"]
