"""The model every layer shares: :class:`Profile` (named tables), the table schema and the error types."""
