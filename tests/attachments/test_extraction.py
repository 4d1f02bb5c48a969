"""``agent.process_attachment``: each format read once, every hostile file ending safely."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import TemporaryUploadedFile

from agent import attachments
from agent.access import SessionRef
from agent.core.events import topic
from agent.models import Attachment
from agent.tasks import process_attachment
from tests.support.files import (
    pdf_bytes,
    picture_bytes,
    png_claiming,
    stored_files,
    upload,
    xlsx_bytes,
    xlsx_with_sheet_xml,
)
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db(transaction=True)

HEAD_ROW = b'<row r="1"><c r="A1" t="inlineStr"><is><t>head</t></is></c></row>'


@pytest.fixture(autouse=True)
def queued(monkeypatch: Any) -> list[str]:
    """The task is run here, by each test; what would have gone to a worker is only recorded."""
    sent: list[str] = []
    monkeypatch.setattr("agent.attachments.api.current_app.send_task", lambda name, args, **options: sent.extend(args))
    return sent


def processed(ref: SessionRef, chat: Any, name: str, data: bytes | Path) -> Attachment:
    """Upload a file, run the task here, and read the row back."""
    if isinstance(data, Path):
        uploaded = TemporaryUploadedFile(name, "application/octet-stream", data.stat().st_size, None)
        with data.open("rb") as source:
            while block := source.read(1 << 20):
                uploaded.write(block)
        uploaded.seek(0)
    else:
        uploaded = upload(name, data)
    attachment = attachments.add_attachment(ref, chat.pk, uploaded, impersonated=False)
    uploaded.close()
    process_attachment(str(attachment.pk))
    return Attachment.objects.get(pk=attachment.pk)


def failed_with(row: Attachment, code: str) -> bool:
    return (row.status, row.error_code, row.text) == ("failed", code, "")


# -- each format ------------------------------------------------------------------------------


def test_the_task_name_is_api() -> None:
    assert process_attachment.name == "agent.process_attachment"


def test_text_is_utf8_with_replacement(ref: SessionRef, chat: Any) -> None:
    row = processed(ref, chat, "notes.txt", "héllo wörld\n".encode() + b"bad \xff byte")
    assert row.status == "ready" and row.text_complete
    assert row.text == "héllo wörld\nbad \ufffd byte"


@pytest.mark.parametrize(
    ("name", "data", "text"),
    [
        ("README.md", b"# Title\n\n* item", "# Title\n\n* item"),
        ("data.json", b'{"a": [1, 2]}', '{"a": [1, 2]}'),
        ("table.csv", b"\xef\xbb\xbfname,qty\nnuts,3\n", "name,qty\nnuts,3\n"),
    ],
)
def test_markdown_json_and_csv_are_read_as_text(ref: SessionRef, chat: Any, name: str, data: bytes, text: str) -> None:
    row = processed(ref, chat, name, data)
    assert (row.status, row.text, row.text_complete) == ("ready", text, True)


def test_a_nul_byte_past_the_head_is_dropped_not_stored(ref: SessionRef, chat: Any) -> None:
    row = processed(ref, chat, "notes.txt", b"a" * 9000 + b"\x00b")
    assert row.status == "ready" and row.text == "a" * 9000 + "b"


def test_pdf_text_is_read_page_by_page(ref: SessionRef, chat: Any) -> None:
    row = processed(ref, chat, "report.pdf", pdf_bytes(["First page says hello", "Second page says goodbye"]))
    assert row.status == "ready" and row.text_complete
    assert "First page says hello" in row.text and "Second page says goodbye" in row.text
    assert row.text.index("hello") < row.text.index("goodbye")


def test_an_encrypted_pdf_fails_as_pdf_encrypted(ref: SessionRef, chat: Any) -> None:
    row = processed(ref, chat, "locked.pdf", pdf_bytes(["secret"], password="s3cret"))
    assert failed_with(row, "pdf_encrypted")


def test_a_pdf_locked_with_an_empty_user_password_is_read(ref: SessionRef, chat: Any) -> None:
    row = processed(ref, chat, "owner-only.pdf", pdf_bytes(["readable anyway"], password=""))
    assert row.status == "ready" and "readable anyway" in row.text


def test_a_pdf_without_text_fails_as_pdf_no_text(ref: SessionRef, chat: Any) -> None:
    assert failed_with(processed(ref, chat, "scan.pdf", pdf_bytes(["", ""])), "pdf_no_text")


def test_spreadsheet_rows_are_read_as_csv_lines_per_sheet(ref: SessionRef, chat: Any) -> None:
    data = xlsx_bytes([["name", "qty"], ["nuts, salted", 3], [None, None], ["bolts", 4.5]], title="Stock")
    row = processed(ref, chat, "stock.xlsx", data)
    assert row.status == "ready" and row.text_complete
    assert row.text == '# Stock\nname,qty\n"nuts, salted",3\nbolts,4.5\n'


def test_a_picture_is_verified_and_re_encoded_no_larger_than_picture_max_px(
    ref: SessionRef, chat: Any, storage_root: Path
) -> None:
    from PIL import Image

    with agent_conf(PICTURE_MAX_PX=100):
        row = processed(ref, chat, "wide.jpg", picture_bytes("JPEG", size=(400, 200)))
    assert (row.status, row.text, row.is_picture, row.content_type) == ("ready", "", True, "image/jpeg")
    [stored] = stored_files(storage_root)  # the original went after commit; the re-encoded copy stays
    with Image.open(stored) as image:
        assert image.size == (100, 50) and image.format == "JPEG"
    assert row.size == stored.stat().st_size and row.file.name.endswith(".jpg")


def test_a_png_with_transparency_stays_png(ref: SessionRef, chat: Any, storage_root: Path) -> None:
    row = processed(ref, chat, "logo.png", picture_bytes("PNG", color=(0, 0, 0, 0)))
    assert (row.status, row.content_type) == ("ready", "image/png")


def test_the_result_is_stored_once_and_the_chat_is_told(
    ref: SessionRef, chat: Any, capture_events: list[tuple[str, dict[str, Any]]]
) -> None:
    attachment = attachments.add_attachment(ref, chat.pk, upload("a.txt", b"first"), impersonated=False)
    assert process_attachment(str(attachment.pk)) is None
    told = {"type": "agent.attachment_processed", "conversation": str(chat.pk), "attachment": str(attachment.pk)}
    assert capture_events == [(topic(chat.pk), told)]
    Attachment.objects.filter(pk=attachment.pk).update(text="kept")
    process_attachment(str(attachment.pk))  # a second delivery changes nothing
    assert Attachment.objects.get(pk=attachment.pk).text == "kept"


# -- hostile files: each ends in bounded time and memory, failed with its code or ready and cut --------


def test_a_20_mb_single_line_text_is_cut_to_the_text_limit(ref: SessionRef, chat: Any, tmp_path: Path) -> None:
    source = tmp_path / "line.txt"
    with source.open("wb") as out:
        for _ in range(20):
            out.write(b"x" * (1024 * 1024 - 1) + b"y")
    with agent_conf(MAX_FILE_BYTES=20 * 1024 * 1024):
        row = processed(ref, chat, "line.txt", source)
    assert row.status == "ready" and not row.text_complete
    assert len(row.text) == 32_000


def test_a_decompression_bomb_picture_fails_as_too_many_pixels(ref: SessionRef, chat: Any) -> None:
    assert failed_with(processed(ref, chat, "bomb.png", png_claiming(60_000, 60_000)), "too_many_pixels")


def test_a_picture_over_the_pixel_limit_fails_as_too_many_pixels(ref: SessionRef, chat: Any) -> None:
    with agent_conf(EXTRACTION_MAX_PIXELS=1000):
        row = processed(ref, chat, "big.png", picture_bytes("PNG", size=(100, 100)))
    assert failed_with(row, "too_many_pixels")


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("lying.png", b"\x89PNG\r\n\x1a\n" + b"garbage" * 100),
        ("lying.jpg", b"\xff\xd8\xff" + b"\x00" * 500),
        ("lying.gif", b"GIF89a" + b"\x01" * 100),
        ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\nendobj\ntrailer<<>>\n%%EOF"),
        ("broken.xlsx", b"PK\x03\x04" + b"\x00" * 200),
    ],
)
def test_a_corrupt_or_lying_file_fails_as_unreadable(ref: SessionRef, chat: Any, name: str, data: bytes) -> None:
    assert failed_with(processed(ref, chat, name, data), "unreadable")


def test_an_xlsx_that_is_a_zip_bomb_fails_before_openpyxl_inflates_it(
    ref: SessionRef, chat: Any, tmp_path: Path
) -> None:
    # given: 300 MB of zeros declared inside a file of a few hundred KB
    bomb = xlsx_with_sheet_xml(tmp_path / "bomb.xlsx", [HEAD_ROW], extra={"xl/media/zeros.bin": 300 * 1024 * 1024})
    assert bomb.stat().st_size < 2 * 1024 * 1024
    assert failed_with(processed(ref, chat, "bomb.xlsx", bomb), "unreadable")


def test_a_million_empty_rows_stop_at_the_row_cap(ref: SessionRef, chat: Any, tmp_path: Path) -> None:
    rows = itertools.chain([HEAD_ROW], (b'<row r="%d"/>' % n for n in range(2, 1_000_001)))
    sheet = xlsx_with_sheet_xml(tmp_path / "rows.xlsx", rows, dimension="A1:A1000000")
    with agent_conf(EXTRACTION_MAX_ROWS=20_000):
        row = processed(ref, chat, "rows.xlsx", sheet)
    assert row.status == "ready" and not row.text_complete
    assert row.text == "# Data\nhead\n"


def test_a_million_full_rows_are_cut_to_the_text_limit(ref: SessionRef, chat: Any, tmp_path: Path) -> None:
    rows = (b'<row r="%d"><c r="A%d"><v>%d</v></c></row>' % (n, n, n) for n in range(1, 1_000_001))
    with agent_conf(ATTACHMENT_TEXT_CHARS=2_000):
        row = processed(
            ref, chat, "million.xlsx", xlsx_with_sheet_xml(tmp_path / "million.xlsx", rows, dimension="A1:A1000000")
        )
    assert row.status == "ready" and not row.text_complete and len(row.text) == 2_000


def test_a_2000_page_pdf_stops_at_the_page_cap(ref: SessionRef, chat: Any) -> None:
    with agent_conf(EXTRACTION_MAX_PAGES=50):
        row = processed(ref, chat, "long.pdf", pdf_bytes(f"p{n}" for n in range(2000)))
    assert row.status == "ready" and not row.text_complete
    assert "p49" in row.text and "p50" not in row.text


def test_a_parser_that_runs_too_long_is_killed_as_extraction_timeout(
    ref: SessionRef, chat: Any, tmp_path: Path
) -> None:
    # a sheet without its declared range: openpyxl reads all of it once before the first row
    rows = (b'<row r="%d"/>' % n for n in range(1, 1_000_001))
    sheet = xlsx_with_sheet_xml(tmp_path / "slow.xlsx", rows)
    with agent_conf(EXTRACTION_TIMEOUT_S=1, EXTRACTION_MAX_ROWS=10_000_000):
        row = processed(ref, chat, "slow.xlsx", sheet)
    assert failed_with(row, "extraction_timeout")


def test_a_parser_over_its_memory_limit_fails_as_unreadable_and_the_worker_lives(ref: SessionRef, chat: Any) -> None:
    with agent_conf(EXTRACTION_MEMORY_MB=40):
        row = processed(ref, chat, "report.pdf", pdf_bytes(["hello"]))
    assert failed_with(row, "unreadable")


def test_the_parser_child_gets_no_secret_of_the_workers_environment(monkeypatch: Any) -> None:
    import io

    from agent.attachments import extraction

    seen: dict[str, Any] = {}
    real_popen = subprocess.Popen

    def recording_popen(command: list[str], **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real_popen(command, **kwargs)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setattr(extraction.subprocess, "Popen", recording_popen)
    source = extraction.StoredFile(io.BytesIO(pdf_bytes(["hello"])))
    assert extraction.run_parser("pdf", source, "application/pdf").text == "hello"
    assert "OPENAI_API_KEY" not in seen["env"] and "DATABASE_URL" not in seen["env"]


def test_parsers_read_the_file_from_their_input_and_print_nothing_but_their_answer() -> None:
    """Run as extraction runs it, in a child process that is given bytes, never a path on some host's disk."""
    from agent.attachments import parsers

    limits = {"chars": 100, "pages": 5, "memory_mb": 4096}
    child = subprocess.run(
        [sys.executable, "-I", parsers.__file__, "pdf", json.dumps(limits)],
        input=pdf_bytes(["hello"]),
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert json.loads(child.stdout) == {"ok": True, "text": "hello", "complete": True}
