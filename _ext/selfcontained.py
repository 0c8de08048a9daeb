"""Keep every page self-contained: drop what would load from another host, or weigh
the page down for nothing.

* sphinx-thebe (a jupyter-book default) injects its loader, pointing at a CDN, and
  with Sphinx 7 injects it twice, which is a console error. The book does not use
  thebe: the launch buttons are plain links.
* myst-nb inlines the ipywidgets state of each executed notebook. The website shows
  the explorers' static HTML view, so that state is never read.

It also loads MathJax on every page, not only on pages with equations of their own:
the navigation shows chapter titles, and a title can hold math. That is the fallback:
``site_pages.py`` typesets the math at build time and then removes the MathJax tags.
"""

DROP_FILES = ("sphinx-thebe.js",)
DROP_BODIES = ("THEBE_JS_URL",)
DROP_TYPES = ("application/vnd.jupyter.widget-state+json",)


def _keep(script) -> bool:
    filename = str(getattr(script, "filename", script) or "")
    attributes = getattr(script, "attributes", {}) or {}
    return not (filename.endswith(DROP_FILES)
                or any(b in attributes.get("body", "") for b in DROP_BODIES)
                or attributes.get("type") in DROP_TYPES)


def strip_scripts(app, pagename, templatename, context, doctree):
    if "script_files" in context:
        context["script_files"] = [s for s in context["script_files"] if _keep(s)]


def setup(app):
    app.set_html_assets_policy("always")
    app.connect("html-page-context", strip_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
