"""Files the tests make with the formats' own writers, and files uploaded and read through the API."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any, Iterable

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from agent.attachments import add_attachment
from agent.models import Attachment
from agent.tasks import process_attachment


def stored_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def upload(name: str, data: bytes, content_type: str = "application/octet-stream") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


def ready(attachment: Attachment, text: str = "", **fields: Any) -> Attachment:
    """Mark a file as read, as ``agent.process_attachment`` would."""
    Attachment.objects.filter(pk=attachment.pk).update(status=Attachment.Status.READY, text=text, **fields)
    attachment.refresh_from_db()
    return attachment


# -- files made by the formats' own writers ---------------------------------------------


def pdf_bytes(pages: Iterable[str], *, password: str | None = None) -> bytes:
    """A PDF whose pages show the given lines of text (Helvetica), written with pypdf."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1") if text else b"")
        page[NameObject("/Contents")] = writer._add_object(stream)
    if password is not None:
        writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def xlsx_bytes(rows: Iterable[Iterable[Any]], title: str = "Sheet") -> bytes:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet(title)
    for row in rows:
        sheet.append(list(row))
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def picture_bytes(fmt: str = "PNG", size: tuple[int, int] = (64, 48), color: Any = (200, 30, 30)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    mode = "RGBA" if fmt == "PNG" and len(color) == 4 else "RGB"
    Image.new(mode, size, color).save(out, fmt)
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims ``width`` × ``height`` pixels: a decompression bomb's shape."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
        + chunk(b"IEND", b"")
    )


def xlsx_with_sheet_xml(
    path: Path, rows_xml: Iterable[bytes], *, dimension: str | None = None, extra: dict[str, int] | None = None
) -> Path:
    """An XLSX written entry by entry with zipfile, its sheet's rows streamed (a huge sheet costs no memory).

    ``dimension`` is the sheet's declared range, as Excel writes it (without
    one, openpyxl reads the whole sheet once to size it); ``extra`` adds
    entries of that many zero bytes (a zip bomb's shape).
    """
    parts = {
        "[Content_Types].xml": (
            b'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            b'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName='
            b'"/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.'
            b'main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.'
            b'openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            b'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            b'2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            b'2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            b'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/'
            b'spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
            b'relationships"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            b'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            b'2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            b'2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
        ),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in parts.items():
            archive.writestr(name, body)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(
                b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
                b'spreadsheetml/2006/main">'
                + (f'<dimension ref="{dimension}"/>'.encode() if dimension else b"")
                + b"<sheetData>"
            )
            block: list[bytes] = []
            for row in rows_xml:
                block.append(row)
                if len(block) == 20_000:
                    sheet.write(b"".join(block))
                    block.clear()
            sheet.write(b"".join(block))
            sheet.write(b"</sheetData></worksheet>")
        for name, size in (extra or {}).items():
            with archive.open(name, "w", force_zip64=True) as entry:
                block = b"\x00" * (1024 * 1024)
                for _ in range(size // len(block)):
                    entry.write(block)
    return path


def post_file(client: Client, token: str, chat: Any, name: str, data: bytes) -> Any:
    url = reverse("agent:attachment_upload", args=[chat.pk])
    return client.post(url, {"file": upload(name, data)}, HTTP_X_CSRFTOKEN=token)


def read_file(ref: Any, chat: Any, name: str, data: bytes) -> Attachment:
    """A file uploaded and read, as the composer and ``agent.process_attachment`` do it."""
    attachment = add_attachment(ref, chat.pk, upload(name, data), impersonated=False)
    process_attachment(str(attachment.pk))
    attachment.refresh_from_db()
    assert attachment.status == Attachment.Status.READY, attachment.error_code
    return attachment
