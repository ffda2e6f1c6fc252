"""CLI command groups, one module per area; strataflow.cli registers them all."""
