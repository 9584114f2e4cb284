"""Measurement: datasets, metrics, runners, benchmarks and reports."""
