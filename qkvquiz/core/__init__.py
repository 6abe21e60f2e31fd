"""The shared vocabulary every layer uses, importing nothing of qkvquiz above it: languages,
tolerances and credit, seeding, places of entries, the door for untrusted input, the output-set
writer and its seals, secrets, the CSV writer, worker processes and where bundled files live."""
