"""Cross-cutting work of every judge call: limits now; cache, retries and accounting next."""
