"""Debian's package data for the packaging checks: the packages installed here and their
dependencies as dpkg tells them, which package owns a file, and the shared libraries a binary
loads or `--static-swift-stdlib` links against."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from deploy_support import run

@dataclass
class Package:
    name: str
    priority: str
    essential: bool
    depends: list[list[str]]   # groups of alternatives
    provides: list[str]


def _names(field_text: str) -> list[list[str]]:
    groups = []
    for group in field_text.split(","):
        alternatives = []
        for alternative in group.split("|"):
            name = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alternative).strip().split(":")[0]
            if name:
                alternatives.append(name)
        if alternatives:
            groups.append(alternatives)
    return groups


def installed_packages() -> dict[str, Package]:
    out = run(["dpkg-query", "-W", "-f",
               "${Package}\t${Essential}\t${Priority}\t${Pre-Depends}\t${Depends}\t${Provides}\t${db:Status-Status}\n"])
    assert out.returncode == 0, out.stderr
    packages: dict[str, Package] = {}
    for line in out.stdout.splitlines():
        name, essential, priority, pre, depends, provides, status = (line.split("\t") + [""] * 7)[:7]
        if status != "installed":
            continue
        package = packages.setdefault(name, Package(name, priority, essential == "yes", [], []))
        package.depends += _names(pre) + _names(depends)
        package.provides += [alt[0] for alt in _names(provides)]
    return packages


def dependency_closure(roots: set[str], packages: dict[str, Package]) -> set[str]:
    """The packages apt installs for `roots`, as far as this machine's dpkg database tells:
    of each group of alternatives, the first one installed here (by name or as a provider)."""
    providers: dict[str, str] = {}
    for package in packages.values():
        for virtual in package.provides:
            providers.setdefault(virtual, package.name)
    seen: set[str] = set()
    todo = [r for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package = packages.get(name)
        if package is None:
            continue
        for group in package.depends:
            chosen = next((a for a in group if a in packages), None) or next(
                (providers[a] for a in group if a in providers), None)
            if chosen and chosen not in seen:
                todo.append(chosen)
    return seen


def base_image_packages(packages: dict[str, Package]) -> set[str]:
    """What debian:bookworm-slim holds: the Essential and Priority: required packages."""
    roots = {p.name for p in packages.values() if p.essential or p.priority == "required"}
    return dependency_closure(roots, packages)


def packages_owning(paths: list[str]) -> dict[str, str]:
    """path -> Debian package, looking through the /lib -> /usr/lib merge and symlinks."""
    candidates: dict[str, list[str]] = {}
    for path in paths:
        variants = {path, os.path.realpath(path)}
        for variant in list(variants):
            if variant.startswith("/lib"):
                variants.add("/usr" + variant)
            elif variant.startswith("/usr/lib"):
                variants.add(variant[len("/usr"):])
        candidates[path] = sorted(variants)
    queries = sorted({v for vs in candidates.values() for v in vs})
    out = run(["dpkg-query", "-S", *queries])
    owner_of: dict[str, str] = {}
    for line in out.stdout.splitlines():
        owners, _, owned = line.rpartition(": ")
        if owners and not owners.startswith("diversion"):
            owner_of[owned] = owners.split(",")[0].strip().split(":")[0]
    return {path: next((owner_of[v] for v in vs if v in owner_of), "") for path, vs in candidates.items()}


def ldd(binary: Path) -> list[str]:
    """The absolute paths of the shared libraries the binary loads."""
    out = run(["ldd", binary])
    assert out.returncode == 0, out.stdout + out.stderr
    libraries = []
    for line in out.stdout.splitlines():
        assert "not found" not in line, line
        match = re.search(r"(/\S+)\s+\(0x", line)
        if match:
            libraries.append(match.group(1))
    return libraries


def swift_static_link_libraries() -> list[str]:
    """The system libraries `--static-swift-stdlib` links against (the toolchain's
    static-stdlib-args.lnk), as paths found by ldconfig; empty if no toolchain is found."""
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    lnk = Path(os.path.realpath(swift)).parent.parent / "lib" / "swift_static" / "linux" / "static-stdlib-args.lnk"
    if not lnk.exists():
        return []
    names = re.findall(r"(?:^|\s)-l(\S+)", lnk.read_text())
    cache = run(["ldconfig", "-p"]).stdout
    paths = []
    for name in names:
        if name.startswith("swift") or name in ("dispatch", "BlocksRuntime"):
            continue  # the Swift runtime itself, linked statically
        match = re.search(rf"^\s*lib{re.escape(name)}\.so(?:\.\d+)* \(libc6,x86-64[^)]*\) => (\S+)", cache, re.M) \
            or re.search(rf"^\s*lib{re.escape(name)}\.so(?:\.\d+)* \([^)]*\) => (\S+)", cache, re.M)
        assert match, f"-l{name} of {lnk}: no such library in the ldconfig cache"
        paths.append(match.group(1))
    return paths
