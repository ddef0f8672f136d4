"""One writer per output format: text, JSON, JUnit, Markdown and the HTML report."""
