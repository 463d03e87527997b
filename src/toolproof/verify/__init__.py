"""Verification: the ordered checks of a run directory and their report."""
