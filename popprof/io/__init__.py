"""Files and their guards: input limits, atomic outputs, the JSON byte lexer, config, progress, units."""
