"""`python -m fusebridge.ops > docs/ops.md`: the op reference."""

from fusebridge.ops import reference_markdown

print(reference_markdown(), end="")
