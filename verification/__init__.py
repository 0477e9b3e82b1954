"""Wayline verification harness: fault-injection drills. Not built yet."""
