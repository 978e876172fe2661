try:
    from harness.cli import entry
except KeyboardInterrupt:  # Ctrl-C while the CLI itself imports: the exit code of an interrupt, no traceback
    from harness.util.errors import EXIT_INTERRUPTED  # constants only: imported already, or nothing to wait for

    raise SystemExit(EXIT_INTERRUPTED) from None

entry()
