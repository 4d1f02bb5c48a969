"""The format parsers (pypdf, openpyxl, Pillow), run in a child process: ``python -I parsers.py``.

A hostile file may hit a slow or greedy path inside a parser; in a child that
path can cost neither the worker's memory (an address-space limit set first
thing) nor its time (the parent kills the child at ``EXTRACTION_TIMEOUT_S``).
Each parser also stops at its own caps (pages, rows, columns, pixels,
uncompressed bytes, characters), so a large but honest file ends ``ready``
with ``text_complete`` false instead of timing out.

No Django and no import of the ``agent`` package here (the child runs this
file alone, isolated): it gets its limits as an argument and the file's bytes
on its standard input (streamed from the site's storage by the worker, so no
host needs the file on its disk), and prints one JSON line:
``{"ok": true, "text", "complete", "content_type"?}`` or ``{"ok": false, "code"}``.
A re-encoded picture's bytes follow that line.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import warnings
import zipfile
from typing import IO, Any, Callable

XLSX_ENTRIES_MAX = 2_000


class Failed(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class TextCollector:
    """Text up to ``limit`` characters; ``full`` once more was offered than fits."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.full = False

    def add(self, text: str) -> None:
        room = self.limit - self.size
        if len(text) > room:
            text = text[:room]
            self.full = True
        self.parts.append(text)
        self.size += len(text)

    def text(self) -> str:
        return "".join(self.parts)


def read_pdf(source: IO[bytes], limits: dict[str, Any]) -> dict[str, Any]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    reader = PdfReader(source)
    if reader.is_encrypted:
        try:
            if not reader.decrypt(""):  # many PDFs are locked with an empty user password
                raise Failed("pdf_encrypted")
        except (DependencyError, FileNotDecryptedError, NotImplementedError):
            raise Failed("pdf_encrypted") from None
    collector = TextCollector(limits["chars"])
    pages = reader.pages
    count = len(pages)
    complete = True
    for number in range(count):
        if number >= limits["pages"]:
            complete = False
            break
        text = pages[number].extract_text() or ""
        collector.add(("\n\n" if number else "") + text)
        if collector.full:
            break
    if not collector.text().strip():
        raise Failed("pdf_no_text")
    return {"ok": True, "text": collector.text(), "complete": complete and not collector.full}


def read_xlsx(source: IO[bytes], limits: dict[str, Any]) -> dict[str, Any]:
    _check_zip(source, limits["unzipped_bytes"])
    from openpyxl import load_workbook

    source.seek(0)
    workbook = load_workbook(source, read_only=True, data_only=True, keep_links=False)
    collector = TextCollector(limits["chars"])
    rows_left = limits["rows"]
    complete = True
    try:
        for sheet in workbook.worksheets:
            if not hasattr(sheet, "iter_rows"):
                continue  # a chart sheet
            collector.add(("\n" if collector.size else "") + f"# {sheet.title}\n")
            columns = min(sheet.max_column or limits["columns"], limits["columns"])
            if (sheet.max_column or 0) > columns:
                complete = False
            for row in sheet.iter_rows(max_col=columns, values_only=True):
                rows_left -= 1
                if rows_left < 0:
                    complete = False
                    break
                if all(value is None for value in row):
                    continue
                collector.add(_csv_line(row))
                if collector.full:
                    break
            if rows_left < 0 or collector.full:
                break
    finally:
        workbook.close()
    return {"ok": True, "text": collector.text(), "complete": complete and not collector.full}


def _check_zip(source: IO[bytes], max_unzipped: int) -> None:
    """A zip bomb ends here, before openpyxl inflates anything: the declared sizes are the bound."""
    try:
        with zipfile.ZipFile(source) as archive:
            entries = archive.infolist()
            if len(entries) > XLSX_ENTRIES_MAX:
                raise Failed("unreadable")
            if sum(entry.file_size for entry in entries) > max_unzipped:
                raise Failed("unreadable")
            if "xl/workbook.xml" not in {entry.filename for entry in entries}:
                raise Failed("unreadable")
    except zipfile.BadZipFile:
        raise Failed("unreadable") from None


def _csv_line(row: tuple[Any, ...]) -> str:
    values = list(row)
    while values and values[-1] is None:
        values.pop()
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(["" if value is None else value for value in values])
    return out.getvalue()


def read_picture(source: IO[bytes], limits: dict[str, Any]) -> dict[str, Any]:
    """Verify the picture, then re-encode it (first frame, no metadata) no larger than ``PICTURE_MAX_PX``."""
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = limits["pixels"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(source) as probed:
                if probed.format != limits["picture_format"]:
                    raise Failed("unreadable")
                if probed.width * probed.height > limits["pixels"]:
                    raise Failed("too_many_pixels")
                probed.verify()
            source.seek(0)
            with Image.open(source) as opened:
                side = limits["max_px"]
                opened.draft("RGB", (side, side))  # JPEG: decode at a reduced scale
                opened.seek(0)
                image = ImageOps.exif_transpose(opened)
                image.thumbnail((side, side))
                keeps_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
                lossless = limits["picture_format"] in ("PNG", "GIF") or keeps_alpha
                picture = io.BytesIO()
                if lossless:
                    content_type = "image/png"
                    image.convert("RGBA" if keeps_alpha else "RGB").save(picture, "PNG", optimize=True)
                else:
                    content_type = "image/jpeg"
                    image.convert("RGB").save(picture, "JPEG", quality=85)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise Failed("too_many_pixels") from None
    return {"ok": True, "text": "", "complete": True, "picture": picture.getvalue(), "content_type": content_type}


PARSERS: dict[str, Callable[[IO[bytes], dict[str, Any]], dict[str, Any]]] = {
    "pdf": read_pdf,
    "xlsx": read_xlsx,
    "picture": read_picture,
}


def _limit_memory(megabytes: int) -> None:
    try:
        import resource
    except ImportError:  # not on this platform: the parent's timeout still bounds the child
        return
    size = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size, size))


def main(argv: list[str]) -> int:
    kind, limits_json = argv
    limits = json.loads(limits_json)
    _limit_memory(limits["memory_mb"])
    answer, sys.stdout = sys.stdout.buffer, sys.stderr  # whatever a parser prints is not the answer
    try:
        result = PARSERS[kind](io.BytesIO(sys.stdin.buffer.read()), limits)
    except Failed as failed:
        result = {"ok": False, "code": failed.code}
    except Exception:  # MemoryError included: a corrupt, lying or greedy file
        result = {"ok": False, "code": "unreadable"}
    picture = result.pop("picture", b"")
    answer.write(json.dumps(result).encode() + b"\n" + picture)
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
