"""Running many trials (concurrent, resumable) and turning runs into training data."""
