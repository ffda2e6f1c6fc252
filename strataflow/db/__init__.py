"""Database plumbing: the engine and pool, the embedded server, migrations, roles and grants."""
