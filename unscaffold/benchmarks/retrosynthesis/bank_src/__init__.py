"""Sources of the retrosynthesis h* bank's tools; bankgen.py renders each into one self-contained script."""
