"""One Jinja environment for the static reports (issue 42 item 4): pages load from their own
package, escape what they print, keep control characters out, and keep filters apart."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest

from metaeval.report.html import page_kit, page_template


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable package with a page in its templates/ folder."""
    root = tmp_path / "kit_pages_pkg"
    (root / "templates").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "templates" / "page.html.j2").write_text(
        "<p>{{ text }}</p>\n{% if shout %}\n<b>{{ text | kit_shout }}</b>\n{% endif %}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "kit_pages_pkg"
    sys.modules.pop("kit_pages_pkg", None)


def test_a_page_loads_from_its_package_escaped_and_printable(package: str) -> None:
    template = page_template(package, "templates/page.html.j2", {"kit_shout": str.upper})
    assert template.environment is page_kit()
    out = template.render(text="<i>a\x1bb</i>", shout=False)
    # autoescaped, the escape character written out, the if-block's lines trimmed
    assert out == "<p>&lt;i&gt;a\\x1bb&lt;/i&gt;</p>\n"
    assert template.render(text="<x>", shout=True) == "<p>&lt;x&gt;</p>\n<b>&lt;X&gt;</b>\n"
    with pytest.raises(jinja2.UndefinedError):
        template.render()  # strict: a missing name is an error, not an empty string


def test_a_filter_name_is_kept_by_its_first_page(package: str) -> None:
    page_template(package, "templates/page.html.j2", {"kit_twice": str.upper})
    page_template(package, "templates/page.html.j2", {"kit_twice": str.upper})  # the same one
    with pytest.raises(ValueError, match="'kit_twice' is already another page's"):
        page_template(package, "templates/page.html.j2", {"kit_twice": str.lower})


def test_a_name_without_its_package_is_not_found(package: str) -> None:
    with pytest.raises(jinja2.TemplateNotFound):
        page_kit().get_template("templates/page.html.j2")
    with pytest.raises(FileNotFoundError):
        page_template(package, "templates/missing.html.j2")


def test_the_three_static_reports_render_from_the_one_kit() -> None:
    from metaeval.protocols.audit.report import html_template
    from metaeval.protocols.buildfind.report.pages import HTML_TEMPLATE, TEMPLATE_PACKAGE

    assert html_template().environment is page_kit()
    assert page_template(TEMPLATE_PACKAGE, HTML_TEMPLATE).environment is page_kit()
    improve = page_template("metaeval.protocols.improve", "templates/report.html.j2")
    assert improve.environment is page_kit()
