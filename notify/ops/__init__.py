"""Operations: liveness, readiness and Prometheus metrics (R-O1, issue 7)."""
