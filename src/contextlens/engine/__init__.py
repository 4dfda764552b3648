"""Cross-cutting work of every judge call: cache, concurrency limits, retries, accounting."""
