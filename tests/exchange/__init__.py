"""Exchange with LMSs: intake of downloads, gradebooks, question banks, Gradescope, CSV."""
