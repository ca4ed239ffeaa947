"""Harbor task folders: instruction.md, task.toml, tests/test.sh writing a reward, solution/solve.sh."""
