"""Wayline studio: the web app (Litestar + Jinja2 + htmx) and its JSON API."""
