"""Definitions and drafts: published versions, importing, diffs, and the draft editor
with its graph (pages, JSON API, services, the drafts table, templates)."""
