"""Attachments: extraction time and peak memory, and the upload's peak memory.

Run: ``.venv/bin/python bench/attachments.py`` (``--runs N`` extractions of each file, 3).

Files, made here with the formats' own writers: a 20 MB single-line text, a
300-page PDF, a 10,000-row XLSX. Each is uploaded through ``add_attachment`` and
read by ``agent.tasks.process_attachment`` in this process, as a worker would.
Each file is read twice: as configured (cut at ``ATTACHMENT_TEXT_CHARS``),
then whole (every page and row). Figures: wall time of the task; the worker's own peak (``tracemalloc``, Python
allocations during the task); the parser child's peak RSS (``wait4``, for the
kinds read in a child). Then one 20 MB upload goes through Django's whole
request handling (WSGI, from a body on disk) and its peak is measured the same
way: the target is under 2 × the upload chunk size plus a fixed overhead, not
the file's size. Stored files go to a temporary folder. Shims set up here
record the child's rusage; nothing in ``agent/`` changes.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import harness

MB = 1024 * 1024


def make_text(folder: Path) -> Path:
    path = folder / "line.txt"
    with path.open("wb") as out:
        for _ in range(20):
            out.write(b"lorem ipsum " * (MB // 12) + b"x" * (MB % 12))
    return path


def make_pdf(folder: Path, pages: int = 300) -> Path:
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
    for number in range(pages):
        lines = " ".join(
            f"(Line {n} of page {number}: the quick brown fox jumps over the lazy dog.) Tj T*" for n in range(40)
        )
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 10 Tf 12 TL 40 760 Td {lines} ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    path = folder / "report.pdf"
    with path.open("wb") as out:
        writer.write(out)
    return path


def make_xlsx(folder: Path, rows: int = 10_000) -> Path:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Orders")
    sheet.append(["order", "customer", "item", "quantity", "price", "note"])
    for n in range(rows - 1):
        sheet.append([n, f"customer {n % 97}", f"item {n % 13}", n % 7 + 1, round(n * 0.37, 2), "ok"])
    path = folder / "orders.xlsx"
    workbook.save(path)
    return path


class ChildPeaks:
    """Wraps ``subprocess.run`` in ``agent.attachments.extraction`` to record each child's peak RSS.

    The child runs the same parser file, under a few lines that print its own
    ``VmHWM`` when it ends (``wait4``'s ``ru_maxrss`` would count the worker's
    memory, inherited across the fork and exec).
    """

    RUNNER = (
        "import runpy, sys\n"
        "sys.argv = sys.argv[1:]\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1], file=sys.stderr)\n"
    )

    def __init__(self) -> None:
        self.peaks_kib: list[int] = []
        self.real_run = subprocess.run

    def run(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        python, isolated, script, *rest = command
        kwargs["stderr"] = subprocess.PIPE
        done = self.real_run([python, isolated, "-c", self.RUNNER, script, *rest], **kwargs)
        self.peaks_kib.append(int(done.stderr.split()[-1]))
        return done


def extract(ref: Any, chat: Any, source: Path, peaks: ChildPeaks, runs: int) -> dict[str, Any]:
    from django.core.files.uploadedfile import TemporaryUploadedFile

    from agent import attachments
    from agent.models import Attachment
    from agent.tasks import process_attachment

    times, worker_peaks, child_peaks, row = [], [], [], None
    for _ in range(runs):
        uploaded = TemporaryUploadedFile(source.name, "application/octet-stream", source.stat().st_size, None)
        with source.open("rb") as data:
            while block := data.read(MB):
                uploaded.write(block)
        uploaded.seek(0)
        attachment = attachments.add_attachment(ref, chat.pk, uploaded, impersonated=False)
        uploaded.close()
        peaks.peaks_kib.clear()
        tracemalloc.start()
        began = time.perf_counter()
        process_attachment(str(attachment.pk))
        times.append(time.perf_counter() - began)
        worker_peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        child_peaks.append(max(peaks.peaks_kib, default=0))
        row = Attachment.objects.get(pk=attachment.pk)
        attachments.remove_attachment(ref, attachment.pk, impersonated=False)
    assert row is not None
    return {
        "file": source.name,
        "size": source.stat().st_size,
        "status": row.status,
        "error": row.error_code,
        "chars": len(row.text),
        "complete": row.text_complete,
        "median_s": statistics.median(times),
        "max_s": max(times),
        "worker_peak": max(worker_peaks),
        "child_peak_kib": max(child_peaks),
    }


def upload_peak(user: Any, chat: Any, folder: Path, size: int = 20 * MB) -> dict[str, Any]:
    """One multipart upload of ``size`` bytes through Django's WSGI handler, its body read from disk."""
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import Client
    from django.urls import reverse

    from agent.models import Attachment

    client = Client()
    client.force_login(user)
    session_cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    token = "b" * 32
    boundary = "benchboundary7d1"
    body = folder / "upload.body"
    with body.open("wb") as out:
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n'
            f"Content-Type: text/plain\r\n\r\n".encode()
        )
        block = b"0123456789abcdef" * (MB // 16)
        for _ in range(size // MB):
            out.write(block)
        out.write(f"\r\n--{boundary}--\r\n".encode())
    length = body.stat().st_size
    handler = WSGIHandler()
    statuses: list[str] = []
    with body.open("rb") as stream:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": reverse("agent:attachment_upload", args=[chat.pk]),
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "HTTP_HOST": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "CONTENT_TYPE": f"multipart/form-data; boundary={boundary}",
            "CONTENT_LENGTH": str(length),
            "HTTP_COOKIE": f"{settings.SESSION_COOKIE_NAME}={session_cookie}; {settings.CSRF_COOKIE_NAME}={token}",
            "HTTP_X_CSRFTOKEN": token,
            "wsgi.input": stream,
            "wsgi.errors": io.StringIO(),
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        tracemalloc.start()
        began = time.perf_counter()
        response = handler(environ, lambda status, headers: statuses.append(status))
        elapsed = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        response.close()
    stored = Attachment.objects.filter(conversation=chat).order_by("-created_at").first()
    return {
        "status": statuses[0],
        "size": size,
        "stored": stored.size if stored else None,
        "seconds": elapsed,
        "peak": peak,
        "chunk": max(h.chunk_size for h in _handlers()),
    }


def _handlers() -> list[Any]:
    from django.conf import settings
    from django.utils.module_loading import import_string

    return [import_string(path)(None) for path in settings.FILE_UPLOAD_HANDLERS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    harness.setup()

    from django.test import override_settings

    from agent.attachments import extraction
    from agent.conversations import create_conversation

    with tempfile.TemporaryDirectory(prefix="agent-bench-files-") as temp:
        folder = Path(temp)
        storage = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": temp + "/media"}}
        from django.conf import settings

        with override_settings(STORAGES={**settings.STORAGES, "default": storage}):
            user = harness.bench_user("bench_attachments")
            ref = harness.login(user)
            chat = create_conversation(ref, {"title": "bench: attachments"}, impersonated=False)
            from celery import current_app

            current_app.send_task = lambda *a, **k: None  # the bench runs the task itself
            peaks = ChildPeaks()
            extraction.subprocess.run = peaks.run  # type: ignore[assignment]
            print("making the files ...", flush=True)
            files = [make_text(folder), make_pdf(folder), make_xlsx(folder)]
            print(
                f"{'file':<12} {'size':>9} {'status':>7} {'chars':>7} {'whole':>6} {'median':>8} {'max':>8} "
                f"{'worker peak':>12} {'child peak RSS':>15}"
            )
            for source, chars in [(f, None) for f in files] + [(f, 100_000_000) for f in files]:
                # first as configured (cut at ATTACHMENT_TEXT_CHARS), then with every page and row read
                with override_settings(AGENT={**settings.AGENT, "ATTACHMENT_TEXT_CHARS": chars}):
                    r = extract(ref, chat, source, peaks, args.runs)
                child = f"{r['child_peak_kib'] / 1024:.1f} MiB" if r["child_peak_kib"] else "(in-process)"
                print(
                    f"{r['file']:<12} {r['size'] / MB:>7.1f}MB {r['status'] + r['error']:>7} {r['chars']:>7} "
                    f"{str(r['complete']):>6} {r['median_s'] * 1000:>6.0f}ms {r['max_s'] * 1000:>6.0f}ms "
                    f"{r['worker_peak'] / MB:>9.2f}MiB {child:>15}"
                )
            u = upload_peak(user, chat, folder)
            target = 2 * u["chunk"]
            print(
                f"\nupload of {u['size'] / MB:.0f} MB through the view: {u['status']}, stored {u['stored']} bytes, "
                f"{u['seconds'] * 1000:.0f} ms; peak Python memory {u['peak'] / 1024:.0f} KiB "
                f"(2 × chunk = {target / 1024:.0f} KiB; the file is {u['size'] / 1024:.0f} KiB)"
            )
            print(f"peak over 2 × chunk (the fixed overhead): {(u['peak'] - target) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
