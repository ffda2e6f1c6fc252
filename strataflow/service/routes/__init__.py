"""One router per resource; every route is one call into the library."""
