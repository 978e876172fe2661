"""Before/after comparisons: running every case under each role, and the verdicts."""
