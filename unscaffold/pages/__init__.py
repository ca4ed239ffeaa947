"""What every HTML page of the toolkit shares: one stylesheet, the page frame, cards and tables, and inline-SVG
charts. Pages fetch nothing, so a file can be mailed or archived."""
