"""Test helpers and test data shared by a metric's core tests and its seed-library shell tests."""
