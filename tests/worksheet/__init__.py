"""Specs, worksheets (variants, asked parts, givens shown), keys and the key cache."""
