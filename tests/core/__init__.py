"""Shared vocabulary: tolerance and credit, seeding and secrets, i18n, the input door (submission
reading, hostile inputs), output sets and integrity, worker pools."""
