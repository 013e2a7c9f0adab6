"""The project stands alone: README, docs and tests point at nothing outside the repository,
the README stays a short overview, and its fresh-machine test command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "tests").glob("*.py"))]
# Local addresses a test may open (the ui's own server) and the SVG namespace are not outside pointers.
LOCAL = re.compile(r"https?://(127\.0\.0\.1|localhost|www\.w3\.org/2000/svg)")


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pointer_outside_the_repository(path: Path) -> None:
    if path == Path(__file__):
        return
    text = path.read_text(encoding="utf-8")
    # the folder beside the checkout and the machine's work folder, spelled so this file names neither
    sibling, machine = "/".join(("..", "shared")), "/".join(("", "work", ""))
    assert sibling not in text and machine not in text, path
    assert not re.search(r"SPEC\s*§", text), path
    outside = [m.group(0) for m in re.finditer(r"https?://[\w-]+\.[\w.-]+\S*", text) if not LOCAL.match(m.group(0))]
    assert outside == [], (path, outside)


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_readme_test_command_is_the_one_ci_runs() -> None:
    command = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' torch==2.13.0 "
               "&& .venv/bin/python -m pytest")
    assert command in (ROOT / "README.md").read_text(encoding="utf-8")
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_links_to_docs_pages_by_name() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("workload", "accounts", "pipeline-and-bill", "serving-scaling-energy", "simulation",
                 "measurement", "sweep-and-solve", "parameter-counts", "trust", "architecture"):
        assert f"docs/{page}.md" in readme, page


def test_every_workload_key_is_documented() -> None:
    """Each key of the schema appears in docs/ by its dotted name (`[[sources]]` fields by their own
    name in the sources paragraph of docs/workload.md): a key added without a word fails here."""
    from trainplan.workload.schema import SECTIONS, SourceSpec

    docs = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    sources = (ROOT / "docs" / "workload.md").read_text(encoding="utf-8").split("### `[[sources]]`", 1)[1]
    missing = [f"{section}.{name}" for section, model in SECTIONS.items() for name in model.model_fields
               if f"`{section}.{name}`" not in docs]
    missing += [f"sources.{name}" for name in SourceSpec.model_fields if f"`{name}`" not in sources]
    assert not missing, missing


def test_readme_exit_status_quotes_the_line_the_command_prints() -> None:
    # the README's example of a refusal is the command's own line, word for word
    import re
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text()
    quoted = re.search(r"\(`(trainplan: cluster\.mfu: [^`]*)`\)", text)
    assert quoted, "the Exit status section quotes a cluster.mfu refusal"
    out = subprocess.run([sys.executable, "-m", "trainplan", "plan", "--set", "cluster.mfu=1.5"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == quoted.group(1)
