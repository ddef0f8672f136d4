"""``popprof record -- CMD``: run a command with profiling on, then export, check and report what it left."""
