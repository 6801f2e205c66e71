"""Ray Serve layer: typed builders are the only way in (`build_app`); deployments are thin
shims over the core. The only package that imports `ray.serve`."""

from memray.serve.args import ServeArgs
from memray.serve.builder import build_app

__all__ = ["ServeArgs", "build_app"]
