"""Drills: running the verification drills from the studio, their recorded runs and
comparisons (pages, JSON API, services, templates)."""
