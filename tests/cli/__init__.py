"""The command line end to end, and what it loads at start-up."""
