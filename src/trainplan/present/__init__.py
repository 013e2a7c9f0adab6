"""Presentation: the JSON-safe cleaner, the quantity formatter, tables, markdown, HTML, plots."""
