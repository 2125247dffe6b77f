"""Span-group catalogs as consumer libraries declare them; importing one registers it."""
