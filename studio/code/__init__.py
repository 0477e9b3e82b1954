"""The studio's part of code-first workflows: their outline drawn from the code, and an
instance's journal (what each durable verb recorded, open waits, set-aside signals)."""
