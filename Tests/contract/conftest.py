"""Puts the contract fuzzing's counts in pytest's closing summary, where `make test` shows them."""
import pytest

_SUMMARY = pytest.StashKey[list]()


def pytest_configure(config):
    config.stash[_SUMMARY] = []


@pytest.fixture
def contract_summary(pytestconfig) -> list:
    """Lines a test appends here are printed in the closing summary, even without -s."""
    return pytestconfig.stash[_SUMMARY]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = config.stash.get(_SUMMARY, [])
    if lines:
        terminalreporter.section("contract fuzzing")
        for line in lines:
            terminalreporter.write_line(line)
