"""L2 memory: the versioned store, the manual-entry API and the profile documents."""
