import json
import re
import sys

# After a command: point at a SMILES that RDKit rejected, so it is fixed before it is used or written.
context = json.loads(sys.argv[1])
match = re.search(r"(?m)^.*(?:SMILES Parse Error|Explicit valence|Can't kekulize|INVALID).*$",
                  context.get("output", ""))
if match:
    print(f"A candidate is malformed: {match.group(0).strip()[:200]}. Fix that SMILES (valence, ring digits, "
          "brackets, aromatic rings) before writing or checking the answer again.")
    sys.exit(1)
