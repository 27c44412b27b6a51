"""Progress of the long commands (`fusebridge bench`, the benchmarks) on stderr, so that stdout
keeps only the results.

tqdm draws the bar where it is installed; without it each step is one plain line. tqdm is not
a dependency of the package: only `fusebridge bench` shows progress, and it needs Paddle, whose
extra (`fusebridge[paddle]`) brings tqdm along, as the `bench` extra does for the benchmarks.
The library and the other commands keep their few dependencies."""

from __future__ import annotations

import sys
from types import TracebackType


class Progress:
    """`total` steps: call `step(label)` as each one starts (the label says what runs now),
    `write(text)` to print results without breaking the bar."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.started = total, desc, 0
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            # leave=None: a bar nested in another (a benchmark section's) goes away when done.
            self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=None, dynamic_ncols=True)

    def step(self, label: str) -> None:
        self.started += 1
        if self.bar is None:
            print(f"{self.desc} [{self.started}/{self.total}] {label}", file=sys.stderr, flush=True)
        else:
            self.bar.update(self.started - 1 - self.bar.n)  # the steps before this one are done
            self.bar.set_postfix_str(label)

    def write(self, text: str) -> None:
        if self.bar is None:
            print(text, flush=True)
        else:
            self.bar.write(text, file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.update(self.started - self.bar.n)
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
