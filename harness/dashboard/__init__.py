"""The offline dashboard: a static site built from the results store (see ``site.py``)."""
