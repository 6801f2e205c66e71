"""Ray Data batch jobs (backfill, maintenance, migrate): thin layers over the core.

Needs the `batch` extra (ray[data], polars, scikit-learn, pyarrow).
"""
