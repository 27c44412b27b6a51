"""The fuzz suite: mutated models, feeds and kernel arguments, each run in a child process with
a timeout and an address-space limit (harness.py). `python -m fuzz` runs the long form and
writes the figures; tests/test_fuzz_suite.py runs the quick form."""
