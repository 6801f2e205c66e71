"""Bulk import of conversation logs (the backfill job's logic; no Ray here)."""
