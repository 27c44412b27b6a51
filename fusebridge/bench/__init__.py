"""fusebridge beside the frameworks' own runtimes, for `fusebridge bench` and benchmarks/: the
Paddle peers (the static Executor, Paddle Inference with and without oneDNN), each in a child
process, and paddle2onnx, run in a child process from a directory of its own. Nothing else in
the package imports this; the frontends (fusebridge.integrations) never do."""
