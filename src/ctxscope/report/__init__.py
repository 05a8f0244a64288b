"""Renderers of reports: terminal, JSON and HTML."""
