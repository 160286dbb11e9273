"""heddle's tuning layer, above the core: autotune (search and its on-disk results), space (the
configurations a search walks), bench (the timing harness). Loaded on first use."""
