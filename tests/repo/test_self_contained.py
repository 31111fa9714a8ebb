"""The repository is self-contained: no tracked file cites a path outside it, and every citation of a docs/ page
names a page and sections that exist.

The facts the code relies on live in docs/ (docs/README.md lists the pages and their public sources). Citing the
reference notes that once sat beside the repository, the design notes beside it, or an absolute path on one machine
leaves a clone with dangling references. Citing a public repository is fine: "tt-isa-documentation, BlackholeA0/..."
or a URL on github.com/tenstorrent.

This file names the forbidden forms without writing them out (hyphens, dots and slashes as `[-]`, `[.]`, `[/]` in
the pattern, `\x2d`, `\x2e`, `\x2f` in the examples), so it passes its own check and any plain search for them.
"""
from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO_ROOT as ROOT

OUTSIDE = re.compile(
    # the reference notes that lived beside the repository (a docs/ page of a similar name is not matched)
    r"(?<![\w/])(?:isa[-]digest|encodings[.]md|unpack[-]sfpu[-]pack|fpu[-]path|noc[-]and[-]launch|"
    r"performance[-]anchors|references[.]md|simulators[.]md|tinygrad[-]integration|ttsim[-]data)"
    # the folder beside the repository and the design notes in it
    r"|[.][.][/]shared|shared[/]reference|shared[/]DESIGN|\bDESIGN[.]md|DESIGN[ ]data[ ]flow"
    # a local copy of the ISA pages; the public repository is cited as "tt-isa-documentation, <page>" or by URL
    r"|(?<!tenstorrent[/])tt[-]isa[-]documentation[/]"
    # a path on one machine
    r"|(?<![\w.])[/]work[/]")

TOKEN = r"\d+(?:\.\d+)*"
SECTION_LIST = rf"§[ \t]*(?P<list>{TOKEN}(?:[ \t]*(?:-|/|,|and)[ \t]*{TOKEN})*)"
# "docs/<page>.md §N" anywhere; inside docs/ also "`page.md` §N" (same folder) and a bare "§N" (the page itself)
DOC_CITATION = re.compile(rf"(?P<page>\bdocs/[\w-]+\.md)(?:`?[ \t]*(?:\([ \t]*)?{SECTION_LIST})?")
LOCAL_CITATION = re.compile(rf"(?:`?(?<![\w/])(?P<page>[\w-]+\.md)`?[ \t]+(?:\([ \t]*)?)?{SECTION_LIST}")
HEADING = re.compile(rf"^#{{2,4}} (?P<num>{TOKEN})\.? ", re.M)


@functools.cache
def tracked_text_files() -> dict[str, str]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    files = {}
    for name in out.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:        # binary files cite nothing
            continue
    return files


def outside_references(text: str) -> list[str]:
    return [m.group() for m in OUTSIDE.finditer(text)]


def sections(page_text: str) -> set[str]:
    return {m.group("num") for m in HEADING.finditer(page_text)}


def test_the_detector_knows_the_forms():
    flagged = ["fpu\x2dpath.md 10.5", "(fpu\x2dpath 3)", "isa\x2ddigest 1(d)",
               "\x2fwork\x2fshared\x2freference\x2funpack\x2dsfpu\x2dpack.md", "shared\x2freference/\nsimulators\x2emd",
               "(noc\x2dand\x2dlaunch.md 3.5)", "`..\x2fshared\x2fDESIGN\x2emd`", "DESIGN data\x20flow step 3",
               "tt\x2disa\x2ddocumentation\x2fBlackholeA0/TensixTile", "ttsim\x2ddata/bh/x.json",
               "\x2fwork\x2fvenv/bin/python", '"\x2fwork\x2fttsim/src/_out/release_bh/libttsim.so"',
               "see encodings\x2emd"]
    allowed = ["docs/fpu_path.md §10.5", "docs/tools.md §3", "tt-isa-documentation, BlackholeA0/Dst.md",
               "https://github.com/tenstorrent/tt-isa-documentation\x2fblob/main/README.md", "ttsim, data/bh/x.json",
               "docs/design.md §4 step 3", "lowering/fpu_reduce.py", "TT_SIMULATOR=/path/to/ttsim"]
    assert [s for s in flagged if not outside_references(s)] == []
    assert [s for s in allowed if outside_references(s)] == []


def test_no_tracked_file_cites_a_path_outside_the_repository():
    found = [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()!r}"
             for name, text in tracked_text_files().items() for m in OUTSIDE.finditer(text)]
    assert found == [], "cite the docs/ page that holds the fact instead:\n" + "\n".join(found)


def test_docs_citations_name_existing_pages_and_sections():
    files = tracked_text_files()
    pages = {name: sections(text) for name, text in files.items() if name.startswith("docs/") and name.endswith(".md")}
    bad = []

    def check(where: str, page: str, listed: str | None):
        if page not in pages:
            bad.append(f"{where}: {page} does not exist")
        elif listed:
            bad.extend(f"{where}: {page} has no §{t}" for t in re.findall(TOKEN, listed) if t not in pages[page])

    for name, text in files.items():
        for m in DOC_CITATION.finditer(text):
            if name in pages and m.group("page") not in pages and not m.group("list"):
                continue        # a facts page naming a public repository's own docs/ file, with its source
            check(name, m.group("page"), m.group("list"))
        if name in pages:
            for m in LOCAL_CITATION.finditer(text):
                check(name, f"docs/{m.group('page')}" if m.group("page") else name, m.group("list"))
    assert bad == [], "\n".join(bad)


def test_the_facts_pages_are_indexed():
    files = tracked_text_files()
    index = files["docs/README.md"]
    unlisted = [n for n in files if n.startswith("docs/") and n.endswith(".md") and n != "docs/README.md"
                and f"`{Path(n).name}`" not in index]
    assert unlisted == [], f"add these pages to docs/README.md: {unlisted}"


def test_docs_media_trace_is_a_chrome_trace():
    """docs/media's example trace (scripts/make_docs_media.py) is Chrome's JSON trace-event format as TT_DUMP writes it:
    complete events with name/ts/dur/pid/tid, thread names, and lanes that add up (tests/support/timelines.py)."""
    import json
    from tests.support.timelines import check_lanes
    traces = sorted((ROOT / "docs" / "media").glob("trace_*.json"))
    assert traces
    for path in traces:
        tr = json.loads(path.read_text())
        names = {e["tid"]: e["args"]["name"] for e in tr["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        spans = [e for e in tr["traceEvents"] if e["ph"] == "X"]
        assert spans and all({"name", "ts", "dur", "pid", "tid", "cat"} <= e.keys() for e in spans)
        check_lanes([(names[e["tid"]], e["ts"], e["ts"] + e["dur"], e["cat"]) for e in spans],
                    tr["otherData"]["counts"]["window cycles"])
