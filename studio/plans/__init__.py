"""Drill plans in the studio: faults pinned on a published version's steps, saved and
versioned per team, run in throwaway schemas, and the coverage they add up to."""
