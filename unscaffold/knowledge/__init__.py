"""The optimized harness h* (banks), running a student under it, and compiling h* into the reviewer's K."""
