"""Fixture writers and synthesisers for tests, fixtures and benchmarks; runtime code never imports this."""
