"""The repository documents itself: every provider rule id it cites is defined in docs/provider-rules.md,
every link into docs/ lands on a heading, every relative link of the README and docs/ resolves, and no file points
at a path outside the repository."""

import re
import subprocess
from pathlib import Path

import pytest

from proxy.repair.catalog import all_rules

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RULES_DOC = DOCS / "provider-rules.md"

# What a reference outside the repository looks like: the team's absolute paths, the notes directory next
# to the checkout, and the notes' own names (the catalogue anywhere but in docs/).
OUTSIDE = re.compile(r"/work/|\.\./shared\b|\bbench-notes\b|(?<!docs/)\bprovider-rules\.md")
# A rule id is a heading of its own in docs/provider-rules.md ("#### OAI-1"), so it has an anchor (#oai-1).
DEFINED = re.compile(r"^#{2,4} ((?:[A-Z]+-)*[A-Z0-9]+)$", re.MULTILINE)
# Links into the docs from any file (docs/protocols.md#repair-rules, also in docstrings and comments) with a section: the
# section must exist.
ANCHORED_LINK = re.compile(r"\bdocs/([\w-]+\.md)#([\w-]+)")
# A Markdown link: [text](target), the target relative unless it has a scheme.
MARKDOWN_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


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
    cited = {rid: f"RULE of {doc.code}" for doc in all_rules() for rid in doc.answers}
    for path in repository_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] in ("proxy", "tests", "bench") or relative == Path("README.md") or (
                path.parent == DOCS and path != RULES_DOC):
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
    for doc in all_rules():
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
    broken = []
    for path in repository_files():
        for name, anchor in ANCHORED_LINK.findall(text_of(path) or ""):
            if not (DOCS / name).is_file() or anchor not in anchors(DOCS / name):
                broken.append(f"{path.relative_to(ROOT)}: docs/{name}#{anchor}")
    assert not broken, broken


def documents() -> list[Path]:
    """The Markdown a reader follows links through: the README, docs/ and the benchmarks' README."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md")), ROOT / "bench" / "README.md"]


def test_every_relative_link_of_the_documents_resolves() -> None:
    broken, checked = [], 0
    for doc in documents():
        for target in MARKDOWN_LINK.findall(doc.read_text()):
            if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:: not a file of the repository
                continue
            file, _, anchor = target.partition("#")
            resolved = (doc.parent / file).resolve() if file else doc
            checked += 1
            if not resolved.exists() or not resolved.is_relative_to(ROOT):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert checked >= 30
    assert not broken, broken


def test_the_readme_links_every_document_in_docs() -> None:
    linked = {target.partition("#")[0] for target in MARKDOWN_LINK.findall((ROOT / "README.md").read_text())}
    assert [doc.name for doc in sorted(DOCS.glob("*.md")) if f"docs/{doc.name}" not in linked] == []
