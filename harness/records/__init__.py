"""The typed records between stages: outcomes, the run record, request logs, manifests, artifacts."""
