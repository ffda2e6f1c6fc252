"""Ingest plumbing: readers, validation and enrichment, intent rules, COPY staging, asset chunking."""
