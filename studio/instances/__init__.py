"""Instances: the list, starting one, an instance's page, its history, following it
live, and the operator's signals and commands (pages, JSON API, services, templates)."""
