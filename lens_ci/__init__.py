"""Lens in your CI: the import-time budget, the benchmark ratio gate and the pytest overhead fixture."""
