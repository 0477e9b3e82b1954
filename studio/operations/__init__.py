"""Operations: the team's dead letters (triage and resolution) and the workers with
their leases (pages, JSON API, services, templates)."""
