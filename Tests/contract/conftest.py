"""The contract tests' fixtures: openapi.yaml as parsed (`doc`), and the contract fuzzing's counts
in pytest's closing summary, where `make test` shows them."""
from typing import Any

import pytest
import yaml

from openapi_doc import OPENAPI_PATH

_SUMMARY = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def doc() -> dict[str, Any]:
    with OPENAPI_PATH.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


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
