"""`build_app(args)`: the memray Serve application from typed args. Deployment shape
(replicas, CPUs, GPUs, autoscaling) comes from the serve config's `deployments:`."""

from __future__ import annotations

from typing import Any

from ray.serve import Application

from memray.serve.args import ServeArgs
from memray.serve.deployments import ApiIngress, EmbedderDeployment


def build_app(args: dict[str, Any] | ServeArgs) -> Application:
    """The API ingress, bound to a batched embedding deployment (`embedder.placement`
    deployment) or embedding in its own replicas (`replica`)."""
    typed = args if isinstance(args, ServeArgs) else ServeArgs.model_validate(args or {})
    memory = typed.memory.model_dump(mode="json")
    embedder = None
    if typed.embedder.placement == "deployment":
        embedder = EmbedderDeployment.bind(  # type: ignore[attr-defined]
            memory, typed.embedder.model_dump())
    app: Application = ApiIngress.bind(  # type: ignore[attr-defined]
        typed.model_dump(mode="json"), embedder)
    return app
