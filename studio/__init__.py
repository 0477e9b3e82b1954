"""Wayline studio: the web app (Litestar + Jinja2 + htmx). Not built yet."""
