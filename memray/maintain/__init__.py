"""Nightly maintenance (the logic; the Ray job is memray/batch/maintenance.py)."""
