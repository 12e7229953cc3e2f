"""README.md is the front door: short, and leading into the documentation site (docs/, built
by `make docs`), where the reference lives."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LIMIT = 12 * 1024  # issue 48: at most 12 KB

# [text](target) outside code; targets with a scheme are not files of this repository
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links() -> set[str]:
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    return {t.split("#", 1)[0] for t in LINK.findall(text) if "://" not in t}


def test_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= LIMIT, f"README.md is {size} bytes, over {LIMIT}: move reference into docs/"


def test_readme_leads_to_every_page_of_the_site() -> None:
    links = _relative_links()
    missing = sorted(t for t in links if not (ROOT / t).exists())
    assert not missing, f"README.md links to files that do not exist: {missing}"
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    unlinked = sorted(pages - links)
    assert not unlinked, f"README.md does not link these pages of the site: {unlinked}"
