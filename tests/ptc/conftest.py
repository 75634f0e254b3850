"""Shared fixtures of the ptc tests."""
