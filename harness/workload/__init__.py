"""What is sent to a server: prompts of exact token counts, the request driver, stateful phases."""
