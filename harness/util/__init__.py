"""Small helpers with one owner each (docs/owners.md). The face names the modules, not their contents: each is one
tool that every layer reads, imported by its own name (``from harness.util.clock import now_iso``).

- :mod:`.atomic`          writing a file so a reader sees the old content or the new, never half of it
- :mod:`.bounded_read`    the one bounded reader: a regular file of a capped size
- :mod:`.clock`           the one clock: UTC, one format for names, one for records
- :mod:`.kill`            the one place a signal ends processes
- :mod:`.proc`            child commands the harness waits for, bounded, each in its own process group
- :mod:`.interrupts`      later SIGINT/SIGTERM hurry a teardown, never lose its record
- :mod:`.errors`          the exception tree and the exit codes it becomes at the CLI edge
- :mod:`.redact`          secrets out of saved artifacts
- :mod:`.output_path`     every path the harness writes checked first
- :mod:`.paths`, :mod:`.project_config`  where the harness reads and writes; the user's project and its settings
- :mod:`.face`            package faces whose names are imported on first use
- :mod:`.argtypes`, :mod:`.collector`, :mod:`.net`, :mod:`.progress`, :mod:`.str_enum`, :mod:`.text`,
  :mod:`.yaml_loaders`    argparse types, the paused collector, URLs, progress lines, closed word sets, text, YAML
"""

__all__ = ["argtypes", "atomic", "bounded_read", "clock", "collector", "errors", "face", "interrupts", "kill", "net",
           "output_path", "paths", "proc", "progress", "project_config", "redact", "str_enum", "text", "yaml_loaders"]
