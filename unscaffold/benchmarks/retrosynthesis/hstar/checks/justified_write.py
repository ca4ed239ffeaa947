import json
import re
import sys

# Before a command: the answer is written through check_reactants (write_to), never by a raw shell write,
# so every written answer was parsed, compared with the product and made canonical.
context = json.loads(sys.argv[1])
command = context.get("command", "")
if re.search(r"(?:>>?|\btee(?:\s+-a)?)\s*['\"]?(?:\./)?answer\.txt\b", command):
    print('Write the answer with check_reactants ({"smiles": "...", "write_to": "answer.txt"}): it checks the '
          "reactants against the product and writes them canonically. A raw write skips those checks.")
    sys.exit(1)
