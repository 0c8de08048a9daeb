"""Every page of the website links the PDF edition (``make pdf``, ``_ext/pdf_edition.py``).

The link is in each page's footer, and the landing page says it under its title. It is
the PDF's address on the published site (``html_baseurl``, which ``_ext/site_pages.py``
derives from the repository): the publish workflow puts ``learn-attention.pdf`` beside the
website's pages and ``learn-attention-student.pdf`` beside the student edition's, so a page
built locally links the published copy, never a file missing from ``_build/html``.
"""

from __future__ import annotations

import html

PDF = "learn-attention.pdf"
STUDENT_PDF = "learn-attention-student.pdf"


def pdf_url(app) -> str:
    name = STUDENT_PDF if getattr(app.config, "student_edition", False) else PDF
    return (app.config.html_baseurl or "").rstrip("/") + "/" + name


def link_html(app) -> str:
    edition = "the student edition as one PDF" if getattr(app.config, "student_edition", False) \
        else "the whole book as one PDF"
    return (f'<p class="ac-pdf-link"><a href="{html.escape(pdf_url(app))}" download>'
            f'Download {edition}</a> (every chapter, figure, question and exercise, for print '
            f'and offline reading).</p>')


def on_page_context(app, pagename, templatename, context, doctree):
    if app.builder.format != "html":
        return
    link = link_html(app)
    context["theme_extra_footer"] = (context.get("theme_extra_footer") or "") + link
    if pagename == app.config.root_doc and "body" in context:
        body = context["body"]
        end = body.find("</h1>")
        if end != -1:
            context["body"] = body[:end + 5] + link + body[end + 5:]


def setup(app):
    app.connect("html-page-context", on_page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
