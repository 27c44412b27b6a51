"""GRU inference, side by side in one run: fusebridge's `fusion_gru` and its peers on the same
float32 inputs and the same random weights, for IC = OC = 128 and 512, 1 / 16 / 64 sentences
of lengths drawn uniformly from 5..60 words (fixed seed: unequal, unsorted), forward and
bidirectional, plus 16 sentences of 50 words each (equal lengths).

What is timed: one call = one whole layer on the whole batch; a table entry is the best call
in ms, of at least 5 (OC 128) / 3 (OC 512) calls with --quick (20 / 8 without), and more while
they fit in 0.3 s (1 s) per implementation and case, after one warm-up call. Per case:
- fusebridge: `fusion_gru` on the LoD input ([words, IC] + int64 offsets) and, on the padded
  input ORT gets, `layout="tnc"` + seq_lens; input projection and recurrence. Weights are
  packed once by `pack_gru_weights`, outside the timing. Two variants: linear_before_reset=1
  with origin_mode=1 (the ONNX / PyTorch / cuDNN GRU, compared with ORT and torch), and
  linear_before_reset=0 with origin_mode=0 (Paddle's formula, compared with the Paddle rows).
- ONNX Runtime: one `GRU` node (opset 17, ir_version 9, linear_before_reset=1, W/R/B as
  initializers; session built outside the timing) on the padded TNC input + sequence_lens,
  CPUExecutionProvider, intra_op_num_threads = threads. The input projection is inside the
  node, so inside the timing; padding the input is not timed (that is ORT's input form).
- torch.nn.GRU: pack_padded_sequence(enforce_sorted=False) of the same padded input, then the
  GRU, under torch.inference_mode(), torch.set_num_threads(threads); the output stays packed.
- Paddle `gru` (legacy static program, CPU kernel): `mul` (the input projection, timed) +
  `gru` per direction, `concat` for bidirectional, as Paddle's tagging models run it.
- Paddle `fusion_gru` with use_onednn (what Paddle's fc_gru / mul_gru fuse passes produce):
  one op per direction (is_reverse for the backward one) + `concat`.
  Both Paddle rows run in a child process (benchmarks/gru_paddle_peer.py; Paddle's oneDNN GRU
  can crash a process, and a crash or an error becomes a table entry) with Paddle's threads =
  threads, on the LoD input; one timed call is one `Executor.run` (feed of a prepared tensor,
  run, fetch of the hidden state without conversion), so it includes the executor's fixed
  cost, reported below the table. The child lives through the whole run and each case is
  timed on Paddle and then, right after, on the others, so all entries of a row are taken
  within seconds of each other on this noisy machine.
All implementations take float32 and the same weights. Paddle's formula is not the ONNX/torch
one (reset applied before the recurrent matmul, h = (1-u)*h_prev + u*c), so the Paddle rows are
timed on their own variant, against fusebridge's Paddle-formula column. Ratios: fusebridge /
the fastest peer of the same variant (below 1: fusebridge is faster).

Before timing, one small bidirectional case checks that every implementation computes the GRU
it is timed on: each against a float64 NumPy GRU of its variant, and ORT against torch
directly. The Paddle oneDNN row is also run with origin_mode=1, which only the oneDNN kernel
honours (Paddle's CPU fusion_gru ignores it): its match shows the oneDNN kernel is the one timed.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.common import best_time, markdown_table
from fusebridge.kernels import fusion_gru, pack_gru_weights, set_num_threads

SEED = 20261121
MIN_LEN, MAX_LEN = 5, 60
CHECK_TOL = 1e-4
PEER_SCRIPT = Path(__file__).with_name("gru_paddle_peer.py")
PEER_TIMEOUT_S = 300
# Each implementation gets at least a case's `repeat` calls, and more while they fit in this
# budget (at most MAX_CALLS): the short cases get many samples on this noisy machine.
BUDGET_S = {True: 0.3, False: 1.0}  # by `quick`
MAX_CALLS = 200
# Paddle's Intel OpenMP threads spin for KMP_BLOCKTIME (200 ms) after each run: let them stop
# before timing the next implementation on the same 2 cores.
PADDLE_SETTLE_S = 0.25

LBR, PADDLE = "lbr", "paddle"  # the two GRU variants timed
COLUMNS = [  # (key, header, variant), in table order
    ("fb_lod", "fusebridge lod", LBR),
    ("fb_tnc", "fusebridge tnc", LBR),
    ("ort", "ORT GRU", LBR),
    ("torch", "torch GRU", LBR),
    ("fb_paddle", "fusebridge lod, Paddle formula", PADDLE),
    ("pd_gru", "Paddle mul+gru", PADDLE),
    ("pd_onednn", "Paddle fusion_gru oneDNN", PADDLE),
]
PADDLE_PEERS = {"pd_gru": "gru", "pd_onednn": "fusion_gru_onednn"}


def best_within(fn: Callable[[], object], repeat: int, budget_s: float) -> float:
    """best_time over at least `repeat` calls, more while they fit in budget_s."""
    first = best_time(fn, 1)  # one warm-up call, one timed
    calls = int(min(MAX_CALLS - 1, max(repeat - 1, budget_s / max(first, 1e-6) - 1)))
    return min(first, best_time(fn, calls, warmup=0)) if calls > 0 else first


@dataclass
class Case:
    key: str
    lengths: np.ndarray  # int64 [N], unsorted
    ic: int
    oc: int
    direction: str  # forward | bidirectional
    repeat: int  # at least this many timed calls per implementation
    budget_s: float  # and more while they fit in this
    equal: bool = False
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def label(self) -> list[str]:
        n, words = len(self.lengths), int(self.lengths.sum())
        if self.equal:
            lengths = f"{int(self.lengths[0])} each ({words} words)"
        else:
            lengths = f"{MIN_LEN}..{MAX_LEN}, max {int(self.lengths.max())} ({words} words)"
        return [str(n), lengths, str(self.oc), self.direction]


def sentence_lengths(n: int) -> np.ndarray:
    """Seeded by n alone: both sizes get the same lengths for the same sentence count."""
    return np.random.default_rng([SEED, n]).integers(MIN_LEN, MAX_LEN + 1, n).astype(np.int64)


def make_weights(ic: int, oc: int, seed: int) -> dict[str, np.ndarray]:
    """Canonical layout for both directions (forward first), gates (update, reset, candidate),
    uniform in +-1/sqrt(OC) like torch's initialisation."""
    rng = np.random.default_rng([SEED, seed, ic, oc])
    k = 1.0 / np.sqrt(oc)

    def u(*shape: int) -> np.ndarray:
        return rng.uniform(-k, k, shape).astype(np.float32)

    return {
        "wx": u(2, ic, 3 * oc),
        "wh": u(2, oc, 3 * oc),
        "bias": u(2, 3 * oc),
        "bias_h": u(2, 3 * oc),
    }


def fill(case: Case, weights: dict[str, np.ndarray]) -> Case:
    """The case's input in both forms (LoD + offsets, right-padded TNC) and its weights."""
    rng = np.random.default_rng([SEED, len(case.lengths), case.ic, int(case.equal)])
    x = rng.standard_normal((int(case.lengths.sum()), case.ic), dtype=np.float32)
    offsets = np.concatenate([[0], np.cumsum(case.lengths)]).astype(np.int64)
    x_pad = np.zeros((int(case.lengths.max()), len(case.lengths), case.ic), np.float32)
    for i, (a, b) in enumerate(itertools.pairwise(offsets)):
        x_pad[: b - a, i] = x[a:b]
    dirs = 1 if case.direction == "forward" else 2
    case.arrays = {"x": x, "offsets": offsets, "x_pad": x_pad, "lengths": case.lengths}
    case.arrays |= {k: np.ascontiguousarray(v[:dirs]) for k, v in weights.items()}
    return case


def make_cases(quick: bool) -> list[Case]:
    repeat = {128: 5 if quick else 20, 512: 3 if quick else 8}
    plan = [(oc, n, False) for oc in (128, 512) for n in (1, 16, 64)]
    plan.insert(3, (128, 16, True))  # 16 sentences of 50 words, after the 128 ones
    cases = []
    for oc, n, equal in plan:
        weights = make_weights(oc, oc, 0)
        lengths = np.full(n, 50, np.int64) if equal else sentence_lengths(n)
        for direction in ("forward", "bidirectional"):
            key = f"{'eq' if equal else 'n'}{n}_oc{oc}_{direction}"
            case = Case(key, lengths, oc, oc, direction, repeat[oc], BUDGET_S[quick], equal)
            cases.append(fill(case, weights))
    return cases


def check_case() -> Case:
    lengths = np.array([3, 7, 1, 5], np.int64)
    return fill(Case("check", lengths, 12, 8, "bidirectional", 0, 0.0), make_weights(12, 8, 1))


# --------------------------------------------------------------- reference and conversions


def reference_gru(a: dict[str, np.ndarray], lbr: bool, origin_mode: bool) -> np.ndarray:
    """float64 GRU over LoD input: [words, D*OC], direction d in columns d*OC:(d+1)*OC."""
    x, offsets = a["x"].astype(np.float64), a["offsets"]
    dirs, oc = a["wx"].shape[0], a["wh"].shape[1]
    out = np.zeros((x.shape[0], dirs * oc))
    for d in range(dirs):
        wh = a["wh"][d].astype(np.float64)
        bias_h = a["bias_h"][d] if lbr else np.zeros(3 * oc)
        g_all = x @ a["wx"][d] + a["bias"][d]
        for start, stop in itertools.pairwise(offsets):
            h = np.zeros(oc)
            for t in range(stop - 1, start - 1, -1) if d == 1 else range(start, stop):
                g, hh = g_all[t], h @ wh + bias_h
                u = 1 / (1 + np.exp(-(g[:oc] + hh[:oc])))
                r = 1 / (1 + np.exp(-(g[oc : 2 * oc] + hh[oc : 2 * oc])))
                if lbr:
                    c = np.tanh(g[2 * oc :] + r * hh[2 * oc :])
                else:
                    c = np.tanh(g[2 * oc :] + (r * h) @ wh[:, 2 * oc :])
                h = u * h + (1 - u) * c if origin_mode else (1 - u) * h + u * c
                out[t, d * oc : (d + 1) * oc] = h
    return out


def padded_to_lod(y: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """[T, N, D*OC] or ONNX's [T, D, N, OC] -> [words, D*OC] in sentence order."""
    y = np.asarray(y)
    if y.ndim == 4:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return np.concatenate([y[:n, i] for i, n in enumerate(lengths)])


# ----------------------------------------------------------------------- in-process peers


def ort_runner(a: dict[str, np.ndarray], direction: str, threads: int) -> tuple[Callable, str]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    dirs, ic, oc = a["wx"].shape[0], a["wx"].shape[1], a["wh"].shape[1]
    # ONNX gates (z, r, h) are (update, reset, candidate): the canonical order, transposed.
    inits = [
        numpy_helper.from_array(np.ascontiguousarray(a["wx"].transpose(0, 2, 1)), "W"),
        numpy_helper.from_array(np.ascontiguousarray(a["wh"].transpose(0, 2, 1)), "R"),
        numpy_helper.from_array(np.concatenate([a["bias"], a["bias_h"]], axis=1), "B"),
    ]
    node = helper.make_node(
        "GRU",
        ["X", "W", "R", "B", "seq_lens"],
        ["Y"],
        hidden_size=oc,
        direction=direction,
        linear_before_reset=1,
    )
    inputs = [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", ic]),
        helper.make_tensor_value_info("seq_lens", TensorProto.INT32, ["N"]),
    ]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["T", dirs, "N", oc])]
    graph = helper.make_graph([node], "gru", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    providers = ["CPUExecutionProvider"]
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=providers)
    feed = {"X": a["x_pad"], "seq_lens": a["lengths"].astype(np.int32)}
    return lambda: sess.run(None, feed)[0], f"onnxruntime {ort.__version__}"


def torch_runner(
    a: dict[str, np.ndarray], direction: str, threads: int
) -> tuple[Callable, Callable, str]:
    """(timed call, call returning the padded output, version); ImportError without torch."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.set_num_threads(threads)
    ic, oc = a["wx"].shape[1], a["wh"].shape[1]
    perm = np.r_[oc : 2 * oc, 0:oc, 2 * oc : 3 * oc]  # torch gates (r, z, n)
    gru = torch.nn.GRU(ic, oc, bidirectional=direction == "bidirectional").eval()
    with torch.no_grad():
        for d in range(a["wx"].shape[0]):
            values = {
                "weight_ih": a["wx"][d].T[perm],
                "weight_hh": a["wh"][d].T[perm],
                "bias_ih": a["bias"][d][perm],
                "bias_hh": a["bias_h"][d][perm],
            }
            for name, value in values.items():
                param = getattr(gru, name + ("_l0_reverse" if d else "_l0"))
                param.copy_(torch.from_numpy(np.ascontiguousarray(value)))
    x, lengths = torch.from_numpy(a["x_pad"]), torch.from_numpy(a["lengths"])

    def call():
        with torch.inference_mode():
            return gru(pack_padded_sequence(x, lengths, enforce_sorted=False))[0]

    def padded() -> np.ndarray:
        return pad_packed_sequence(call())[0].numpy()

    return call, padded, f"torch {torch.__version__}"


def fusebridge_runners(a: dict[str, np.ndarray], direction: str) -> dict[str, Callable]:
    w_lbr = pack_gru_weights(a["wx"], a["wh"], a["bias"], a["bias_h"])
    w_paddle = pack_gru_weights(a["wx"], a["wh"], a["bias"])
    x, x_pad, offsets, seq_lens = a["x"], a["x_pad"], a["offsets"], a["lengths"]
    lbr = {"direction": direction, "linear_before_reset": True, "origin_mode": True}
    paddle = {"direction": direction, "linear_before_reset": False, "origin_mode": False}
    return {
        "fb_lod": lambda: fusion_gru(x, w_lbr, offsets=offsets, layout="lod", **lbr),
        "fb_tnc": lambda: fusion_gru(x_pad, w_lbr, seq_lens=seq_lens, layout="tnc", **lbr),
        "fb_paddle": lambda: fusion_gru(x, w_paddle, offsets=offsets, layout="lod", **paddle),
    }


# ---------------------------------------------------------------------- Paddle, in a child


class PaddlePeer:
    """benchmarks/gru_paddle_peer.py in a child process, one request at a time. A crash (or a
    request past PEER_TIMEOUT_S) answers {"crash": why}; the next request starts a new child."""

    def __init__(self, threads: int, data: Path, workdir: Path):
        self.threads, self.data, self.workdir = threads, data, workdir
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.starts = 0
        self.version = "?"
        self.broken: str | None = None  # why the child cannot even start

    def _start(self) -> dict | None:
        self.starts += 1
        env = dict(os.environ)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[name] = str(self.threads)
        env["GLOG_minloglevel"] = "2"
        self.stderr_path = self.workdir / f"paddle_stderr{self.starts}.txt"
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(PEER_SCRIPT), str(self.threads), str(self.data)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.lines = queue.Queue()
        self.printed: collections.deque[str] = collections.deque(maxlen=50)
        args = (self.proc, self.lines, self.printed)
        threading.Thread(target=self._read, args=args, daemon=True).start()
        answer = self._answer()
        if "crash" in answer:
            self.broken = f"Paddle did not start: {answer['crash']}"
            return {"crash": self.broken}
        self.version = answer.get("paddle", "?")
        return None

    @staticmethod
    def _read(proc: subprocess.Popen, lines: queue.Queue, printed: collections.deque) -> None:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = None
            if isinstance(event, dict) and "event" in event:
                lines.put(event)
            else:  # something Paddle printed (its crash report goes to stdout)
                printed.append(line.strip())
        lines.put(None)

    def _answer(self) -> dict:
        try:
            event = self.lines.get(timeout=PEER_TIMEOUT_S)
        except queue.Empty:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"crash": f"no answer in {PEER_TIMEOUT_S} s (killed)"}
        if event is None:  # the child's stdout closed: it died
            return {"crash": self._exit_reason()}
        kind = event.pop("event")
        return {"error": event["error"]} if kind == "error" else event

    def _exit_reason(self) -> str:
        rc = self.proc.wait()
        self.proc = None
        try:
            why = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        except ValueError:
            why = f"exit status {rc}"
        text = [*self.printed, *self.stderr_path.read_text(errors="replace").splitlines()]
        text = [ln.strip() for ln in text if ln.strip()]
        errors = [ln for ln in text if "Error" in ln or "error:" in ln or "Exception" in ln]
        return why + (f": {errors[-1][:200]}" if errors else "")

    def request(self, request: dict) -> dict:
        if self.broken:
            return {"crash": self.broken}
        if self.proc is None:
            failed = self._start()
            if failed:
                return failed
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child died: _answer reads the end of its stdout and its status
        return self._answer()

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None


_JOB_INDEX = itertools.count()  # unique Paddle variable names per job


def paddle_job(case: Case, key: str, **extra) -> dict:
    job = {"index": next(_JOB_INDEX), "case": case.key, "peer": PADDLE_PEERS[key]}
    job |= {"direction": case.direction, "origin_mode": False}
    return job | {"repeat": case.repeat, "budget_s": case.budget_s} | extra


# ------------------------------------------------------------------------------------ run


def check(peer: PaddlePeer, threads: int, workdir: Path) -> tuple[str, list[str]]:
    """Every implementation on the small check case against the NumPy GRU of its variant."""
    case = check_case()
    a, lengths = case.arrays, case.lengths
    outs: dict[str, np.ndarray | str] = {}
    ort_call, _ = ort_runner(a, case.direction, threads)
    outs["ORT GRU"] = padded_to_lod(ort_call(), lengths)
    try:
        outs["torch GRU"] = padded_to_lod(torch_runner(a, case.direction, threads)[1](), lengths)
    except ImportError:
        outs["torch GRU"] = "torch not installed"
    fb = fusebridge_runners(a, case.direction)
    outs["fusebridge lod"] = fb["fb_lod"]()
    outs["fusebridge tnc"] = padded_to_lod(fb["fb_tnc"](), lengths)
    outs["fusebridge lod, Paddle formula"] = fb["fb_paddle"]()
    for i, (key, name, origin_mode) in enumerate(
        [
            ("pd_gru", "Paddle mul+gru", False),
            ("pd_onednn", "Paddle fusion_gru oneDNN", False),
            ("pd_onednn", "Paddle fusion_gru oneDNN, origin_mode=1", True),
        ]
    ):
        path = str(workdir / f"check{i}.npy")
        job = paddle_job(case, key, origin_mode=origin_mode, output=path)
        answer = peer.request({"op": "run", "job": job})
        outs[name] = np.load(path) if "output" in answer else entry(answer)

    refs = {
        "lbr": reference_gru(a, lbr=True, origin_mode=True),
        "paddle": reference_gru(a, lbr=False, origin_mode=False),
        "paddle, origin_mode=1": reference_gru(a, lbr=False, origin_mode=True),
    }
    variant = dict.fromkeys(outs, "lbr")
    variant |= {name: "paddle" for name in outs if "Paddle" in name}
    variant["Paddle fusion_gru oneDNN, origin_mode=1"] = "paddle, origin_mode=1"
    comparisons = [(name, outs[name], refs[variant[name]]) for name in outs]
    comparisons.append(("ORT GRU vs torch GRU, directly", outs["ORT GRU"], outs["torch GRU"]))
    rows, failed = [], []
    for name, out, ref in comparisons:
        if isinstance(ref, str) or isinstance(out, str):  # a peer missing or crashed
            rows.append([name, ref if isinstance(ref, str) else out, "-"])
            continue
        err = float(np.abs(np.asarray(out, np.float64) - ref).max())
        rows.append([name, f"{err:.1e}", "ok" if err <= CHECK_TOL else "MISMATCH"])
        if err > CHECK_TOL:
            failed.append(name)
    title = (
        f"Check: {len(lengths)} sentences (lengths {', '.join(map(str, lengths))}), "
        f"IC = {case.ic}, OC = {case.oc}, bidirectional: max abs difference to a float64 NumPy "
        f"GRU of each one's variant (tolerance {CHECK_TOL:g})."
    )
    return f"{title}\n\n" + markdown_table(["implementation", "max abs diff", ""], rows), failed


def entry(answer: dict, notes: list[str] | None = None) -> str:
    """Table entry for a Paddle answer without a number; with notes, the message goes there."""
    kind = "crashed" if "crash" in answer else "error"
    message = str(answer.get("crash") or answer.get("error") or "no answer").replace("|", "/")
    if notes is None:
        return f"{kind}: {message}"
    if message not in notes:
        notes.append(message)
    return f"{kind} [{notes.index(message) + 1}]"


def run(quick: bool = False, threads: int = 2) -> str:
    t_start = time.perf_counter()
    set_num_threads(threads)
    cases = make_cases(quick)
    times: dict[tuple[str, str], float | str] = {}
    notes: list[str] = []
    versions = {"ort": "onnxruntime", "torch": "torch: not installed"}
    with tempfile.TemporaryDirectory(prefix="fusebridge_gru_bench_") as tmp:
        workdir = Path(tmp)
        data = workdir / "inputs.npz"
        keys = ("x", "lengths", "wx", "wh", "bias")
        np.savez(
            data, **{f"{c.key}/{k}": c.arrays[k] for c in [check_case(), *cases] for k in keys}
        )
        peer = PaddlePeer(threads, data, workdir)
        try:
            check_text, failed = check(peer, threads, workdir)
            overhead = peer.request({"op": "overhead"}).get("seconds")
            # Imported here: benchmarks.gru_builds runs this module's cases on other builds of
            # fusebridge, which may predate fusebridge.bench.progress.
            from fusebridge.bench.progress import Progress

            with Progress(len(cases), "gru") as progress:
                for c in cases:
                    progress.step(c.key)
                    for key in PADDLE_PEERS:
                        answer = peer.request({"op": "run", "job": paddle_job(c, key)})
                        times[(c.key, key)] = answer.get("seconds") or entry(answer, notes)
                    time.sleep(PADDLE_SETTLE_S)
                    runners = fusebridge_runners(c.arrays, c.direction)
                    runners["ort"], versions["ort"] = ort_runner(c.arrays, c.direction, threads)
                    try:
                        runners["torch"], _, versions["torch"] = torch_runner(
                            c.arrays, c.direction, threads
                        )
                    except ImportError:
                        times[(c.key, "torch")] = "not installed"
                    for key, fn in runners.items():
                        times[(c.key, key)] = best_within(fn, c.repeat, c.budget_s)
        finally:
            peer.close()

    rows = []
    for c in cases:
        row = c.label()
        for key, _, _ in COLUMNS:
            t = times[(c.key, key)]
            row.append(f"{t * 1e3:.2f}" if isinstance(t, float) else t)
        for fb_key, variant in (("fb_lod", LBR), ("fb_paddle", PADDLE)):
            peers = [
                (times[(c.key, k)], h)
                for k, h, v in COLUMNS
                if v == variant and not k.startswith("fb_") and isinstance(times[(c.key, k)], float)
            ]
            if peers:
                t, name = min(peers)
                row.append(f"{times[(c.key, fb_key)] / t:.2f} ({name})")
            else:
                row.append("-")
        rows.append(row)
    header = ["sentences", "lengths", "IC = OC", "direction"]
    header += [f"{h} ms" for _, h, _ in COLUMNS]
    header += [
        "fusebridge lod / fastest of ORT, torch",
        "fusebridge Paddle formula / fastest Paddle",
    ]

    repeats = " / ".join(f"{r} (OC {oc})" for oc, r in {c.oc: c.repeat for c in cases}.items())
    lines = [
        f"### GRU inference, float32, {threads} threads",
        "",
        f"Peers: {versions['ort']}, {versions['torch']}, paddlepaddle {peer.version}. "
        f"ms per layer call, best of at least {repeats} calls, more "
        f"while they fit in {cases[0].budget_s:g} s per implementation and case. Lengths drawn "
        f"uniformly from {MIN_LEN}..{MAX_LEN} (seed {SEED}), the same for both sizes. The first "
        "four implementations compute linear_before_reset=1, origin_mode=1 (ONNX, PyTorch); the "
        "last three compute Paddle's formula (linear_before_reset=0, origin_mode=0). All include "
        "the input projection; weight packing is outside every timing.",
        "",
        markdown_table(header, rows),
        "",
    ]
    if overhead is not None:
        lines.append(
            f"Paddle's Executor.run of a one-op program takes {overhead * 1e3:.2f} ms: a fixed "
            "cost inside each Paddle entry."
        )
    if peer.starts > 1:
        lines.append(f"The Paddle child process was started {peer.starts} times.")
    lines += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    lines += ["", check_text]
    if failed:
        lines += ["", f"**MISMATCH: {', '.join(failed)} do not compute the GRU of their column.**"]
    lines += ["", f"(GRU section: {time.perf_counter() - t_start:.0f} s.)"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick=True))
