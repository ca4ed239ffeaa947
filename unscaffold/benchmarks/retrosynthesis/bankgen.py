"""Which of the retrosynthesis bank's tools are rendered from which source in bank_src/ (with chem.py's
canonical forms and class names, and the template table `bank_src/retro_templates.tsv`). How rendering
works, and why: `unscaffold/benchmarks/bankgen.py`. `python -m unscaffold.benchmarks.retrosynthesis.bankgen`
rewrites the scripts (`--check` only lists the stale ones).
"""

from __future__ import annotations

import sys

from unscaffold.benchmarks.bankgen import BankSources

SOURCES = BankSources("retrosynthesis", {
    "tools/retro_templates.py": "bank_src/retro_templates.py",
    "tools/check_reactants.py": "bank_src/check_reactants.py",
})

if __name__ == "__main__":
    sys.exit(SOURCES.main(sys.argv[1:]))
