"""MXNet: symbol JSON + .params read without mxnet (load.py); fusebridge ops registered into
a running MXNet (register.py)."""
