"""USPTO-style single-step retrosynthesis: built-in reactions, a USPTO-50k loader, an RDKit scorer, h* and K."""
