"""Test-only hooks for the loopback authorization server: counters, fault injection, admin API."""
