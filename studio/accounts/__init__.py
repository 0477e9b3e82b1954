"""Accounts and settings: signing in, people and teams, sessions, API tokens,
invitations, sign-in limits, and their tables' SQL (pages, JSON API, services,
templates)."""
