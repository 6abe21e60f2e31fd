"""Problem families: every step against independent oracles, mistakes told apart, the forms a teacher writes."""
