import json
import re
import sys

# Before a command: refuse ones that may never end on their own unless they carry a timeout.
context = json.loads(sys.argv[1])
command = context.get("command", "")
unbounded = r"\bwhile\s+(?:true|:)|\btail\s+-f\b|\bsleep\s+[0-9]{3,}|FindMCS|EnumerateStereoisomers|\bwatch\b"
if re.search(unbounded, command) and not re.search(r"\btimeout\s+\d", command):
    print("This command may run without end (loop, follower, long sleep, MCS or stereoisomer enumeration): "
          "prefix it with `timeout 60` or bound it.")
    sys.exit(1)
