"""Online serving on Ray Serve: the Open Inference Protocol (KServe v2) over REST, requests
batched dynamically with every answer equal to the request run alone (docs/serving.md).
Needs `pip install "fusebridge[serve]"`.

    from ray import serve
    from fusebridge.batch import BatchModel
    from fusebridge.serve import build_app

    serve.run(build_app(BatchModel("tagger/"), "tagger", max_batch_size=16), route_prefix="/")
"""

from fusebridge.errors import MissingDependencyError

try:
    import pyarrow  # noqa: F401
    import starlette  # noqa: F401
    from ray import serve  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra brings them
    raise MissingDependencyError(
        f'fusebridge.serve needs Ray Serve ({exc}): pip install "fusebridge[serve]"'
    ) from exc

from fusebridge.serve.app import build_app

__all__ = ["build_app"]
