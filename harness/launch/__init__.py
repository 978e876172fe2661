"""Before a server starts: the launcher seam (real SGLang or the reference server) and pre-flight."""
