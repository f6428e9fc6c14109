"""The README and docs/ stay honest where a machine can tell: every relative link resolves (a file
that exists, a heading that exists), every configuration key they name is a real one, every
`BROKER_*` variable they name exists, and every shell example defines the variables it uses.

The real keys are the second column of README's settings table (what the Swift tests hold to the
configuration model: `readmeListsTheSettingsTable`), the keys `config/example.yaml` writes, also
those it shows commented out (`#   key_file: ...`), and full key paths the configuration code
writes in Sources/BrokerCore/Config (its problem messages name `webhooks.secret_file`, which the
example names only in prose). A provider's or an app's keys are taken from any provider or app
of the example, so `providers.<id>.KEY` is real when some provider there has KEY.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

SECTIONS = ("server", "log", "sessions", "state", "providers", "apps", "webhooks")
# Keys written on purpose as wrong ones: the README's example of the error an unknown key gets.
DELIBERATELY_WRONG = {"providers.corp.clinet_id"}
# Shell variables an example may use without setting them: the user's environment.
ENVIRONMENT = {"PWD", "HOME", "USER", "EDITOR", "PATH"}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def text_outside_code(text: str) -> str:
    """The text with fenced code blocks blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text
    h = h.replace("`", "").lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in text_outside_code(path.read_text(encoding="utf-8")).split("\n"):
        m = re.match(r"#{1,6} (.+)", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[str]:
    text = text_outside_code(path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve(page: Path):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {rel(dest)}")
    assert not broken, f"{rel(page)}: " + "; ".join(broken)


def test_the_docs_pages_are_linked_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    assert DOCS, "docs/ has no pages"
    unlinked = [rel(p) for p in DOCS if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def settings_table() -> list[tuple[list[str], list[str]]]:
    """(variables, keys) of README's settings table rows, as ReadmeConfigTable.swift reads them."""
    rows = []
    for line in README.read_text(encoding="utf-8").split("\n"):
        if not line.startswith("| `BROKER_"):
            continue
        cells = line.split("|")
        rows.append((re.findall(r"BROKER_[A-Z_]+", cells[1]), re.findall(r"`([a-z_.]+)`", cells[2])))
    return rows


def example_keys() -> set[str]:
    """Every key path config/example.yaml writes or shows commented out; provider and app ids as <id>."""
    keys: set[str] = set()
    stack: list[tuple[int, str]] = []
    first_commented: int | None = None  # in a run of comment lines, the column of its first key
    for raw in (ROOT / "config" / "example.yaml").read_text(encoding="utf-8").split("\n"):
        m = re.match(r"^(\s*)([a-z_][a-z0-9_-]*):(\s|$)", raw)
        if m:
            first_commented = None
            indent = len(m.group(1))
        else:
            # A key shown commented out ("  #   key_file: /run/secrets/state-key", a whole
            # "#   webhooks:" block): its depth is the comment's, nested as the text after '#' is.
            m = re.match(r"^(\s*)#(\s+)([a-z_][a-z0-9_]*):(\s+[^\s#]+)?\s*(#.*)?$", raw)
            if not raw.lstrip().startswith("#"):
                first_commented = None
            if not m:
                continue
            column = len(m.group(1)) + 1 + len(m.group(2))
            if first_commented is None:
                first_commented = column
            indent = len(m.group(1)) + max(0, column - first_commented)
            m = re.match(r"^()(.*)$", m.group(3))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parts = [name for _, name in stack] + [m.group(2)]
        if len(parts) >= 2 and parts[0] in ("providers", "apps"):
            parts[1] = "<id>"
        keys.add(".".join(parts))
        stack.append((indent, m.group(2)))
    return keys


def config_source_keys() -> set[str]:
    """Full key paths the configuration code itself writes (its problem messages, its key tables):
    `webhooks.secret_file`, which the example names only in prose."""
    keys = set()
    for path in (ROOT / "Sources" / "BrokerCore" / "Config").rglob("*.swift"):
        text = path.read_text(encoding="utf-8")
        keys.update(re.findall(rf"\b(?:{'|'.join(SECTIONS)})(?:\.[a-z0-9_]+)+\b", text))
    return keys


def real_keys() -> set[str]:
    keys = example_keys() | config_source_keys()
    for _, row_keys in settings_table():
        keys.update(row_keys)
    return keys


def named_keys(text: str) -> set[str]:
    """Configuration keys written in backticks: `server.limits.max_body_bytes`, `providers.corp.issuer`."""
    found = set()
    for token in re.findall(r"`([^`\n]+)`", text):
        if not re.fullmatch(rf"(?:{'|'.join(SECTIONS)})(?:\.[a-z0-9_<>{{}}-]+)+", token):
            continue
        if re.search(r"[<>{}*]", token):  # a placeholder (`server.tls_*`, `providers.<id>.x`)
            continue
        found.add(token)
    return found


def test_the_key_sets_are_read():
    keys = real_keys()
    for key in ("server.limits.max_body_bytes", "state.key_file", "providers.<id>.api_base_url",
                "apps.<id>.redirect_uris", "state.postgres.url", "webhooks.secret_env"):
        assert key in keys, key


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_named_configuration_keys_exist(page: Path):
    keys = real_keys()
    unknown = []
    for key in sorted(named_keys(page.read_text(encoding="utf-8")) - DELIBERATELY_WRONG):
        parts = key.split(".")
        if parts[0] in ("providers", "apps") and len(parts) >= 3:
            generic = ".".join([parts[0], "<id>", *parts[2:]])
            if generic in keys:
                continue
        if key in keys:
            continue
        # A section or group named whole (`state.postgres`, `server.limits`) is real when keys are under it.
        if any(k.startswith(key + ".") for k in keys):
            continue
        unknown.append(key)
    assert not unknown, f"{rel(page)} names keys the configuration does not have: {unknown}"


def source_text() -> str:
    parts = []
    for path in (ROOT / "Sources").rglob("*"):
        if path.is_file() and path.suffix in (".swift", ".c", ".h"):
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_named_broker_variables_exist(page: Path):
    table = {v for variables, _ in settings_table() for v in variables}
    sources = source_text()
    named = set(re.findall(r"\bBROKER_[A-Z0-9_]*[A-Z0-9]", page.read_text(encoding="utf-8")))
    unknown = sorted(v for v in named if v not in table and not re.search(rf"\b{v}\b", sources))
    assert not unknown, f"{rel(page)} names variables neither the settings table nor Sources has: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_shell_examples_define_what_they_use(page: Path):
    """A shell example runs as printed: every variable it reads ($B, $SESSION, ...) it sets itself."""
    missing = []
    for language, body in code_blocks(page.read_text(encoding="utf-8")):
        if language not in ("sh", "bash", "shell"):
            continue
        code = re.sub(r"#[^\n]*", "", re.sub(r"'[^'\n]*'", "''", body))  # single-quoted text and comments
        used = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", code))
        defined = set(re.findall(r"(?:^|[\s;(])([A-Za-z_][A-Za-z0-9_]*)=", code))
        defined |= set(re.findall(r"\b(?:for|read)\s+([A-Za-z_][A-Za-z0-9_]*)", code))
        for name in sorted(used - defined - ENVIRONMENT):
            missing.append(f"${name} in the block starting {body.split(chr(10))[0][:60]!r}")
    assert not missing, f"{rel(page)}: shell examples read variables they do not set: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_golang_oauth2_pkce_and_device_helpers_say_their_version(page: Path):
    """golang.org/x/oauth2's PKCE and device helpers arrived in v0.13: a paragraph that uses them says so."""
    helpers = ("GenerateVerifier", "S256ChallengeOption", "VerifierOption", "DeviceAuth", "DeviceAccessToken")
    paragraphs = re.split(r"\n\s*\n|\n(?=- )", page.read_text(encoding="utf-8"))
    silent = [p.strip()[:60] for p in paragraphs if any(re.search(rf"\b{h}\b", p) for h in helpers) and "v0.13" not in p]
    assert not silent, f"{rel(page)}: golang.org/x/oauth2 helpers without 'v0.13 or later': {silent}"
