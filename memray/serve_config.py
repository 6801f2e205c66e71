"""Where `memray serve` (and the soak bench's serve target) find their Ray Serve config."""

from __future__ import annotations

from pathlib import Path


def default_serve_config() -> str:
    """serve_configs/local.yaml of a checkout when run from one, else the packaged copy."""
    here = Path("serve_configs/local.yaml")
    if here.is_file():
        return str(here)
    return str(Path(__file__).with_name("serve") / "configs" / "local.yaml")
