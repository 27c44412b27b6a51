"""Running a model: the Session API (session.py), its feeds (feeds.py), where a graph is cut
(schedule.py), ONNX Runtime partitions (onnx_partition.py), If and Loop with our ops inside
(control_flow.py), and the program that runs the steps (program.py)."""

from fusebridge.runtime.session import Session

__all__ = ["Session"]
