"""`python -m fusebridge.bench.cuda_tagger OUT.json`: the bundled tagger end to end on the GPU,
tags on the host, Session(device="cuda") against the cpu Session, the example's sentences
repeated to 16 and 256; each row says whether the tags are equal. The cuda check
(fusebridge.cuda.check) runs it as a command: a Session is the layer above the engine."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np

import fusebridge as fb
from fusebridge.cuda.gpu_bench import _row, compare
from fusebridge.models import assets

SENTENCES = (16, 256)


def rows() -> list[dict]:
    path = assets.path("tagger")
    model, _ = fb.optimize(fb.load(path))
    words = np.load(path / "example_words.npy", allow_pickle=False)
    lengths = [int(t) for t in (path / "example_lengths.txt").read_text().split()]
    cpu, gpu = fb.Session(model), fb.Session(model, device="cuda")
    found = []
    for n in SENTENCES:
        repeat = n // len(lengths)
        feeds = {"words": fb.LoDTensor(np.tile(words, (repeat, 1)), lengths=lengths * repeat)}
        times = compare(
            {
                "ours Session cuda": functools.partial(gpu.run, feeds, to_host=True),
                "ours Session cpu": functools.partial(cpu.run, feeds),
            },
            calls=3,
        )
        row = _row(f"tagger, {n} sentences", times, "ours Session cuda")
        want, got = cpu.run(feeds), gpu.run(feeds, to_host=True)
        row["tags equal"] = all(np.array_equal(got[k].data, want[k].data) for k in want)
        found.append(row)
    return found


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(rows()))
