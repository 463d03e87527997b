"""Runs (seed 002): spec, planner, executor, run directory, frozen replay and diff."""
