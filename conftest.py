"""Registers the sglang-repro pytest plugin: scenario files under scenarios/ become test items."""

pytest_plugins = ["harness.pytest_plugin"]
