"""Operations: run records, scopes, flow running, status, serving deployments and the HTML report."""
