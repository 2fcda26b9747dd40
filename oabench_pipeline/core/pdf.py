"""Opening an official PDF from bytes, with one clear error for whatever is not a readable PDF."""

from __future__ import annotations

import pymupdf


def open_pdf(pdf_bytes: bytes, what: str, error: type[ValueError]) -> pymupdf.Document:
    """Open the bytes as a PDF (`what`: "booklet", "answer key"), raising `error` on garbage.

    pymupdf "repairs" many non-PDFs (an HTML error page opens as an empty document), so the header PDF
    readers require within the first KiB is checked first; an encrypted PDF cannot be read either.
    """
    if not pdf_bytes:
        raise error(f"{what} is empty (0 bytes), expected a PDF")
    if b"%PDF-" not in pdf_bytes[:1024]:
        raise error(f"{what} is not a readable PDF: no %PDF- header (starts with {pdf_bytes[:20]!r})")
    try:
        doc = pymupdf.open(stream=pdf_bytes, filetype="pdf")
    except (RuntimeError, ValueError) as exc:
        raise error(f"{what} is not a readable PDF: {exc}") from exc
    if doc.needs_pass:
        doc.close()
        raise error(f"{what} PDF is encrypted")
    return doc
