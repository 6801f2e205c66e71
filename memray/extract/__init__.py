"""Extractors turn conversation turns into candidate facts and commands."""
