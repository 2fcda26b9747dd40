"""Parse every booklet of ../shared/oab (43rd-45th and the archive) and write each one's questions
as text, for reading side by side with the rendered pages.

Usage: `.venv/bin/python scripts/dump_booklets.py OUT_DIR [EDITION ...]` writes `OUT_DIR/<edition>.txt`
(one block per question: number, pages, picture flag, stem, choices) and prints one line per
booklet with its edition as the pages name it and the CPU time of the parse. Render a page to
compare with: `pymupdf.open(path)[page - 1].get_pixmap(dpi=80).save("page.png")`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline.core.booklet import parse_booklet  # noqa: E402

SHARED = REPO_ROOT.parent / "shared" / "oab"


def booklet_files() -> dict[int, tuple[Path, int]]:
    """Edition -> (booklet PDF, question count), from both manifests."""
    files = {}
    for entry in json.loads((SHARED / "manifest.json").read_text(encoding="utf-8"))["editions"]:
        files[entry["edition"]] = (SHARED / entry["prova"]["file"], 80)
    for entry in json.loads((SHARED / "archive-manifest.json").read_text(encoding="utf-8"))["editions"]:
        files[entry["edition"]] = (SHARED / entry["booklet"]["file"], entry["questions"])
    return dict(sorted(files.items()))


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: dump_booklets.py OUT_DIR [EDITION ...]", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    files = booklet_files()
    editions = [int(edition) for edition in argv[1:]] or list(files)
    for edition in editions:
        path, count = files[edition]
        start = time.process_time()
        booklet = parse_booklet(path.read_bytes(), question_count=count)
        spent = time.process_time() - start
        blocks = []
        for q in booklet.questions:
            choices = "\n".join(
                f"({letter}) {text}"
                for letter, text in zip("ABCD", (q.choice_a, q.choice_b, q.choice_c, q.choice_d), strict=True)
            )
            blocks.append(
                f"===== {edition}/{q.number} pages={q.pages} picture={q.requires_image}\n{q.stem}\n{choices}\n"
            )
        (out / f"{edition}.txt").write_text("".join(blocks), encoding="utf-8")
        print(
            f"edition {edition}: {len(booklet.questions)} questions, header says {booklet.edition_in_header}, {spent:.2f} s CPU"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
