"""A minimal one-chapter EPUB, for the tests that need one (parsing, pages, malformed inputs)."""

from __future__ import annotations

import zipfile
from pathlib import Path

CONTAINER = ('<?xml version="1.0"?><container version="1.0" '
             'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
             '<rootfile full-path="content.opf" media-type="application/oebps-package+xml"/>'
             "</rootfiles></container>")


def xhtml(body: str, title: str = "c") -> str:
    """A chapter document around `body` (its HTML)."""
    return (f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title>'
            f"</head><body>{body}</body></html>")


def write_epub(path: Path, chapter: str | None, *, title: str = "T", language: str | None = None,
               container: bool = True, compress_chapter: int = zipfile.ZIP_DEFLATED) -> Path:
    """An EPUB at `path` whose one chapter is the document `chapter` (None: listed, but missing from
    the zip); container=False leaves out META-INF/container.xml. The mimetype comes first, stored."""
    lang = f"<dc:language>{language}</dc:language>" if language else ""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        if container:
            z.writestr("META-INF/container.xml", CONTAINER)
        z.writestr(
            "content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
            'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f'<dc:title>{title}</dc:title><dc:identifier id="id">x</dc:identifier>{lang}</metadata>'
            '<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
            '<spine><itemref idref="c1"/></spine></package>',
        )
        if chapter is not None:
            z.writestr("c1.xhtml", chapter, compress_type=compress_chapter)
    return path
