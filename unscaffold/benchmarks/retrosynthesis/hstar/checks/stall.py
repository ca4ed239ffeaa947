import sys

from _answer import answer_lines

# Before finishing: the episode must not end without an answer file (a reply with only an intent ends it).
lines = answer_lines()
if not lines:
    print("answer.txt is missing or empty: write the chosen reactants (one line, dot-separated) before finishing.")
    sys.exit(1)
