try:
    from harness.cli import entry
except KeyboardInterrupt:  # Ctrl-C while the CLI itself imports: the exit code of an interrupt, no traceback
    raise SystemExit(130) from None

entry()
