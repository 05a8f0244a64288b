"""The pure core: items, counting, framing, ledger, views, learned correction, waste, limits.

Nothing here imports the OpenTelemetry SDK or a provider SDK
(``tests/core/test_pure_core.py`` imports the whole package with them blocked).
"""
