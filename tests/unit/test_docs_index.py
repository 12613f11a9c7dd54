"""docs/README.md, the front page of docs/: it sends a reader to every document, and every
link in it leads somewhere (the file, and the heading an anchor names)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
LINK = re.compile(r"\]\(([^)#]+)(?:#([^)]+))?\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.MULTILINE)
    return {slug(h) for h in headings}


def test_the_front_page_names_every_document() -> None:
    index = (DOCS / "README.md").read_text()
    linked = {target for target, _ in LINK.findall(index)}
    missing = sorted(
        p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in linked
    )
    assert missing == []


def test_every_link_of_the_front_page_leads_somewhere() -> None:
    broken = []
    for target, anchor in LINK.findall((DOCS / "README.md").read_text()):
        path = (DOCS / target).resolve()
        if not path.exists():
            broken.append(target)
        elif anchor and anchor not in anchors(path):
            broken.append(f"{target}#{anchor}")
    assert broken == []


def test_the_readme_points_at_the_front_page() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    assert "(docs/README.md)" in readme
    assert readme.startswith("# eipctl\n\n```sh\n")  # its opening stays the two commands
