"""Benchmarks behind `memray bench ...`. Results go to BENCHMARKS.md with their command."""
