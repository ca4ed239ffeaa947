"""Harness evolution: from failures on the train split to an optimized h* (`--single`) or to a frozen pool
of sibling banks (`--pool N`)."""
