"""Sources of the h* bank's tools and checks; bankgen.py inlines the shared modules into each script."""
