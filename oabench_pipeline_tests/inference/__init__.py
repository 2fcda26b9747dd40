"""Tests of the model client."""
