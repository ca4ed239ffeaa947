import json
import sys

from _answer import answer_lines, checked

# After a command that touched the answer: say when the reactants lose a product element or ring system.
context = json.loads(sys.argv[1])
if "answer.txt" not in context.get("command", ""):
    sys.exit(0)
lines = answer_lines()
if not lines:
    sys.exit(0)
_, problems, warnings, _ = checked(lines[0])
found = [p for p in problems if p.startswith("MISSING")] + [w for w in warnings if w.startswith("LOST")]
if found:
    print("answer.txt: " + "; ".join(found) + ". Find the missing reactant or the route that keeps the scaffold; "
          "never add reagents only to balance atoms.")
    sys.exit(1)
