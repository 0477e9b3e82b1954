"""Settings every test shares.

Hypothesis runs without per-example deadlines: on 2 shared cores a slow example is
load, not a bug, and a timing failure would make CI flaky. Examples stay bounded by
each test's own settings, and pytest-timeout bounds every test.
"""

from hypothesis import settings

settings.register_profile("wayline", deadline=None, print_blob=True)
settings.load_profile("wayline")
