"""The package Inspect's entry point names, so leanrig's tasks register as ``leanrig/NAME``."""
