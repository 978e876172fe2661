"""History: metric series over builds, change detection, and alerts (design.md, "Memory and search")."""
