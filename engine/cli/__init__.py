"""The `wayline` command line."""
