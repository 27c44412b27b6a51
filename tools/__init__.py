"""Scripts run by hand from the repository root as `python -m tools.NAME`, that write committed
files the tests then check: extract_peer_op_lists (docs/data/, the peers' op lists, once) and
ops_coverage (docs/ops-coverage.md, from those lists and fusebridge's converter tables)."""
