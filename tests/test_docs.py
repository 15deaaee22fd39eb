"""The repository documents itself: every provider rule id it cites is defined in docs/provider-rules.md,
every link into docs/ lands on a heading, and no file points at a path outside the repository."""

import re
import subprocess
from pathlib import Path

import pytest

from proxy.registry import rule_docs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RULES_DOC = DOCS / "provider-rules.md"

# What a reference outside the repository looks like: the team's absolute paths, the notes directory next
# to the checkout, and the notes' own names (the catalogue anywhere but in docs/).
OUTSIDE = re.compile(r"/work/|\.\./shared\b|\bbench-notes\b|(?<!docs/)\bprovider-rules\.md")
# A rule id is a heading of its own in docs/provider-rules.md ("#### OAI-1"), so it has an anchor (#oai-1).
DEFINED = re.compile(r"^#{2,4} ((?:[A-Z]+-)*[A-Z0-9]+)$", re.MULTILINE)
# Links into the docs (and from the docs back to the README) with a section: the section must exist.
ANCHORED_LINK = re.compile(r"(\bdocs/(?:provider-rules|benchmarks)\.md|(?<=\()(?:provider-rules|benchmarks)\.md"
                           r"|(?<=\()\.\./README\.md)#([\w-]+)")


def repository_files() -> list[Path]:
    """Tracked files and new ones not ignored: what a commit would carry."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: which files belong to the repository is unknown")
    return [ROOT / name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return None


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in doc.read_text().splitlines() if line.startswith("#")}


def defined_ids() -> set[str]:
    return set(DEFINED.findall(RULES_DOC.read_text()))


def cited_ids() -> dict[str, str]:
    """Rule id -> where it is cited: the rules' declarations, and any text in proxy/, tests/, bench/ and the README
    that names an id of the universal (S*), extra (E-*) or a provider family the catalogue defines."""
    families = sorted({rid.split("-")[0] for rid in defined_ids() if re.fullmatch(r"[A-Z]+-\d+", rid)})
    pattern = re.compile(rf"\b(S\d{{1,2}}|E-[A-Z0-9]+(?:-[A-Z0-9]+)*|(?:{'|'.join(families)})-\d+)\b")
    cited = {rid: f"RULE of {doc.code}" for doc in rule_docs("chat") for rid in doc.answers}
    for path in repository_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] in ("proxy", "tests", "bench") or relative == Path("README.md"):
            for rid in pattern.findall(text_of(path) or ""):
                cited.setdefault(rid, str(relative))
    return cited


def test_no_file_refers_to_a_path_outside_the_repository() -> None:
    found = []
    for path in repository_files():
        if path == Path(__file__).resolve():  # this file names the patterns it looks for
            continue
        for number, line in enumerate((text_of(path) or "").splitlines(), 1):
            match = OUTSIDE.search(line)
            if match and not (match.group().startswith("provider-rules") and path.parent == DOCS):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "point these at docs/provider-rules.md or docs/benchmarks.md:\n" + "\n".join(found)


def test_every_cited_rule_id_is_defined_in_the_catalogue() -> None:
    missing = {rid: where for rid, where in cited_ids().items() if rid not in defined_ids()}
    assert not missing, f"cited but not defined in docs/provider-rules.md: {missing}"


def test_the_catalogue_names_the_repairs_that_answer_each_merged_rule() -> None:
    # Sections 0 and 3 say, per universal rule (S*), extra (E-*) and BASE, which toolmend rules answer it.
    answered: dict[str, set[str]] = {}
    for doc in rule_docs("chat"):
        for rid in doc.answers:
            answered.setdefault(rid, set()).add(doc.code)
    sections = re.split(r"^#{2,4} ", RULES_DOC.read_text(), flags=re.MULTILINE)
    checked = 0
    for section in sections:
        rid, _, body = section.partition("\n")
        if rid == "BASE" or re.fullmatch(r"S\d+|E-[A-Z0-9-]+", rid):
            line = next((text for text in body.splitlines() if text.startswith("toolmend:")), "")
            assert set(re.findall(r"\bTM\d+\b", line)) == answered.get(rid, set()), (rid, line)
            checked += 1
    assert checked >= 14  # BASE, S1-S13 at least


def test_links_into_the_docs_land_on_a_heading() -> None:
    targets = {"provider-rules.md": anchors(RULES_DOC), "benchmarks.md": anchors(DOCS / "benchmarks.md"),
               "README.md": anchors(ROOT / "README.md")}
    broken = []
    for path in repository_files():
        for target, anchor in ANCHORED_LINK.findall(text_of(path) or ""):
            if anchor not in targets[Path(target).name]:
                broken.append(f"{path.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken, broken
