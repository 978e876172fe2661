"""What the harness assumes about SGLang, each fact with the real source line that backs it."""
