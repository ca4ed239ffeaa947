import json
import re
import sys

context = json.loads(sys.argv[1])
pattern = r"(?:^|[;&|]\s*)(?:yes|watch)\b|tail\s+-f|sleep\s+[0-9]{3,}"
if re.search(pattern, context.get("command", "")):
    print("This command does not end on its own; use a bounded form (head -n, a count, or timeout N).")
    sys.exit(1)
