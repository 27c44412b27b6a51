"""What the tests share: error bounds (error_bounds, graph_bounds), framework oracles
(paddle_oracle, paddle_gru_op, mxnet_oracle), model and program builders, fixture generators,
and a fresh interpreter on the fusebridge under test (python_under_test).

Tests import them as `from helpers.error_bounds import ...`: pytest puts tests/ on sys.path
(tests/conftest.py, in a folder without __init__.py, under pytest's default "prepend" import
mode), and only tests/, not the repository root, so the tests import the installed fusebridge.
The helpers import each other relatively (`from .error_bounds import ...`), so the fixture
generators also run from the repository root as `python -m tests.helpers.NAME`, and the
benchmarks import them as `tests.helpers.NAME`."""
