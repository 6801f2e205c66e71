"""Moving memories to another embedding model (the logic; the Ray job is
memray/batch/migrate.py)."""
