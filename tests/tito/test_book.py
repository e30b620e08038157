"""`tito book build` and `tito.book.check_site`: a small book (modules 01 and 02) built in a
throwaway copy of the course passes every check, and the checks catch what they exist for
(solution text in a page, a script from the network, a link that leads nowhere)."""
import html
import json
import shutil
from pathlib import Path

import pytest

from tito import book

pytestmark = [pytest.mark.timeout(900), pytest.mark.command]

NEEDED = ["tito", "tinytorch", "solutions", "modules", "milestones", "book", "pyproject.toml"]


def _seed_milestone(root: Path) -> str:
    """A milestone record and plot where `tito book build --no-milestones` looks for them, so
    the page shows a plot without training anything."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = root / "build" / "book" / "milestones"
    out.mkdir(parents=True)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2, 3], [1.0, 0.5, 0.3, 0.2], label="loss")
    ax.legend()
    fig.savefig(out / "perceptron_1958.png", dpi=60)
    plt.close(fig)
    (out / "perceptron.json").write_text(json.dumps(
        {"result": "accuracy 100.0% (seeded by the test)", "met": True, "plot": str(out / "perceptron_1958.png")}))
    return "perceptron_1958.png"


@pytest.fixture(scope="module")
def site(tmp_path_factory, course_factory):
    """(course root, html folder, tito's output) of `tito book build --modules 01 02` in a copy."""
    course = course_factory(tmp_path_factory.mktemp("book") / "course", NEEDED)
    root = course.root
    _seed_milestone(root)
    proc = course.tito("book", "build", "--modules", "01", "02", "--no-milestones", timeout=850)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html_dir = root / "build" / "book" / "html"
    assert proc.stdout.strip().splitlines()[-1] == str(html_dir / "index.html")
    return root, html_dir, proc


def test_a_small_book_builds_and_check_site_finds_nothing(site):
    root, html_dir, proc = site
    chapters = sorted(p.name for p in (html_dir / "modules").glob("*.html"))
    assert chapters == ["01_tensor.html", "02_activations.html"]
    page = (html_dir / "modules" / "02_activations.html").read_text(encoding="utf-8")
    assert "at a glance" in page and "Prerequisites" in page  # the chapter's header
    assert "NotImplementedError" in page  # a solution cell shows its stub...
    assert "cell_output" in page and "<img" in page  # ...the other cells the reference's outputs
    milestones = (html_dir / "milestones.html").read_text(encoding="utf-8")
    assert "perceptron_1958.png" in milestones and "seeded by the test" in milestones
    assert "tito book build" in (html_dir / "cli.html").read_text(encoding="utf-8")
    assert (root / "build" / "book" / "executed" / "01_tensor.ipynb").is_file()  # the cache
    problems = book.check_site(html_dir, root)
    assert problems == [], "\n".join(problems)
    shots = sorted(p.name for p in (root / "build" / "book" / "screenshots").glob("*.png"))
    assert "index-1280.png" in shots and "index-390.png" in shots and "milestones-390.png" in shots


def _copy_site(site, tmp_path) -> Path:
    dest = tmp_path / "html"
    shutil.copytree(site[1], dest)
    return dest


def test_a_solution_line_in_a_page_is_reported(site, tmp_path):
    root = site[0]
    secret = book.solution_lines(root)
    assert len(secret["01_tensor"]) >= 10, "too few solution lines to look for: the check proves little"
    line = sorted(secret["01_tensor"], key=len)[-1]
    html_dir = _copy_site(site, tmp_path)
    page = html_dir / "modules" / "02_activations.html"
    text = page.read_text(encoding="utf-8")
    assert book.static_problems(html_dir, root) == []
    leaked = '<div class="highlight"><pre><span></span>    ' + html.escape(line) + "\n</pre></div>"
    page.write_text(text.replace("</main>", leaked + "</main>", 1), encoding="utf-8")
    problems = book.check_site(html_dir, root, browser=False)
    assert any(p.startswith("modules/02_activations.html:") and "01_tensor" in p for p in problems), problems


def test_a_script_from_the_network_and_a_broken_link_are_reported(site, tmp_path):
    root = site[0]
    html_dir = _copy_site(site, tmp_path)
    index = html_dir / "index.html"
    text = index.read_text(encoding="utf-8")
    index.write_text(text.replace("</head>", '<script src="https://cdn.example.com/x.js"></script></head>', 1)
                     .replace("</main>", '<a href="modules/99_missing.html">gone</a></main>', 1), encoding="utf-8")
    sheet = next((html_dir / "_static").rglob("*.css"))
    sheet.write_text(sheet.read_text(encoding="utf-8") + "\n@import url(//fonts.example.com/a.css);\n")
    problems = book.check_site(html_dir, root, browser=False)
    assert any(p.startswith("index.html:") and "<script src>" in p for p in problems), problems
    assert any(p.startswith("index.html:") and "99_missing.html" in p for p in problems), problems
    assert any("@import" in p for p in problems), problems
