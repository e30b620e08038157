"""`tito book build`: the course website, built offline with Jupyter Book 1.x.

What it does, in order (everything lands under build/book/):
  1. src/: the book's source tree. The hand-written pages of book/ are copied; each available
     module becomes one chapter, rendered from its *student* notebook (never the solution)
     with a short header (goals and prerequisites, taken from the notebook itself) and the
     reference's outputs attached to the cells whose source is the same in the student
     notebook and the solution (prose, demos, checks). A solution cell keeps its stub and
     shows no output; error outputs and stderr are dropped.
  2. executed/: executed solution notebooks, `<slug>.ipynb` with `<slug>.sha256` (the digest
     of the solution file it came from). A missing or stale one is made by running the
     solution notebook with nbclient against the reference build, `--jobs` at a time.
     `build_book(root, executed={slug: path})` takes executed notebooks from the caller.
  3. milestones/: each milestone run on the reference build (its plot and record), rerun
     only when the milestone or the reference changed; `--no-milestones` uses what is there.
  4. The milestones page and a command reference generated from tito's own parser.
  5. html/: the site (jupyter-book, execution off). MathJax 2.7 comes from the
     jupyter-server-mathjax package and is served from the site itself; nothing on any page
     is fetched from the network.

`check_site(html_dir)` lists what is wrong with a built site (empty: good): solution text in
a page, anything fetched from the network, internal links that lead nowhere, and pages that
render blank or with untypeset math in headless chromium.
"""
from __future__ import annotations

import contextlib
import hashlib
import html as html_lib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tito.errors import TitoError

EXECUTE_TIMEOUT_S = int(os.environ.get("TITO_BOOK_CELL_TIMEOUT", "900"))  # per cell
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MODULES_CAPTION = "Modules"  # the part of book/_toc.yml that tito fills with the chapters


def book_root(root: Path) -> Path:
    from tito.build import build_root

    return build_root(root) / "book"


def _write_if_changed(path: Path, text: str) -> bool:
    """Unchanged files keep their mtime, so Sphinx rebuilds only the pages that changed."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def _copy_if_changed(src: Path, dest: Path) -> None:
    if dest.is_file() and dest.read_bytes() == src.read_bytes():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- executed solution notebooks ------------------------------------------------------------

def _cached(cache: Path, module) -> Path | None:
    nb, stamp = cache / f"{module.slug}.ipynb", cache / f"{module.slug}.sha256"
    if nb.is_file() and stamp.is_file() and stamp.read_text().strip() == _sha256(module.solution_path):
        return nb
    return None


def _execute(module, package_parent: Path, cache: Path) -> str | None:
    """Run one solution notebook (in a worker process, its kernel seeing the reference
    build); returns a problem, or None when the executed notebook is in the cache."""
    import tempfile

    cache.mkdir(parents=True, exist_ok=True)
    digest = _sha256(module.solution_path)
    out = cache / f"{module.slug}.ipynb.part"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "MPLBACKEND")}
    env.update({"PYTHONPATH": str(package_parent), "TQDM_DISABLE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    with tempfile.TemporaryDirectory(prefix=f"tito-book-{module.slug}-") as scratch:
        tito_parent = str(Path(__file__).resolve().parent.parent)  # this tito, not an installed one
        code = (f"import sys; sys.path.insert(0, {tito_parent!r}); from tito.book import _execute_worker; "
                f"raise SystemExit(_execute_worker(*sys.argv[1:]))")
        cmd = [sys.executable, "-c", code, str(module.solution_path), str(out), scratch]
        proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        return f"{module.label}: executing {module.solution_path.name} failed:\n{tail}"
    os.replace(out, cache / f"{module.slug}.ipynb")
    (cache / f"{module.slug}.sha256").write_text(digest + "\n")
    errors = proc.stdout.strip()
    return f"{module.label}: {errors}" if errors else None


def _execute_worker(solution: str, out: str, cwd: str) -> int:
    """In a worker process: run a solution notebook with nbclient,
    write it executed; print which cells raised (their error outputs are not shown)."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    nb = jupytext.read(solution, fmt="py:percent")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=EXECUTE_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": cwd}})
    client.execute()
    failed = [str(i) for i, c in enumerate(nb.cells, 1) if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    if failed:
        print(f"cell(s) {', '.join(failed)} raised an error while the solution ran (not shown in the book)")
    nbformat.write(nb, out)
    return 0


def executed_notebooks(root: Path, modules, jobs: int = 2, given: dict | None = None) -> dict[str, Path]:
    """{slug: executed solution notebook} for `modules`: given ones (copied into the cache),
    cached ones whose solution is unchanged, and the rest executed now, `jobs` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    cache = book_root(root) / "executed"
    cache.mkdir(parents=True, exist_ok=True)
    result = {}
    for module in modules:
        if module.slug in (given or {}):
            src = Path(given[module.slug])
            if src.resolve() != (cache / f"{module.slug}.ipynb").resolve():
                shutil.copyfile(src, cache / f"{module.slug}.ipynb")
            (cache / f"{module.slug}.sha256").write_text(_sha256(module.solution_path) + "\n")
        found = _cached(cache, module)
        if found:
            result[module.slug] = found
    todo = [m for m in modules if m.slug not in result and m.solution_path.is_file()]
    if todo:
        from tito.build import build_solutions

        package = build_solutions(root)
        print(f"tito book: running {len(todo)} solution notebook(s) for their outputs "
              f"({max(1, jobs)} at a time): {', '.join(m.slug for m in todo)}", flush=True)
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for module, problem in zip(todo, pool.map(lambda m: _execute(m, package, cache), todo)):
                if problem:
                    print(f"tito book: warning: {problem}", file=sys.stderr, flush=True)
                found = _cached(cache, module)
                if found:
                    result[module.slug] = found
        print(f"tito book: ran them in {time.perf_counter() - start:.0f} s", flush=True)
    return result


# --- module chapters ------------------------------------------------------------------------

def _clean_outputs(outputs: list) -> list:
    """The outputs a reader should see: no errors, no stderr (warnings, progress bars), no
    widgets (they need JavaScript from a CDN), no execution counts."""
    kept = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "error" or (kind == "stream" and out.get("name") == "stderr"):
            continue
        if kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            if WIDGET_MIME in data:
                continue
            if kind == "execute_result":
                out = dict(out, output_type="display_data")
                out.pop("execution_count", None)
        kept.append(out)
    return kept


def _sections(text: str) -> list[tuple[str, str]]:
    """A markdown cell cut at its `## ` headings: [(heading or '', body), ...]."""
    parts, heading, lines = [], "", []
    for line in text.split("\n"):
        if line.startswith("## "):
            parts.append((heading, "\n".join(lines)))
            heading, lines = line[3:].strip(), []
        else:
            lines.append(line)
    parts.append((heading, "\n".join(lines)))
    return parts


def _header_cells(module, first_cell_source: str) -> list[str]:
    """The notebook's opening cell split into: its title and introduction; a header box with
    its goals and prerequisites (moved out of the opening cell, so they appear once); the
    rest of the cell."""
    parts = _sections(first_cell_source)
    picked = {h.lower(): body.strip() for h, body in parts if h.lower() in ("goals", "prerequisites")}
    intro = parts[0][1].rstrip()
    rest = "\n".join(f"## {h}\n{body}" for h, body in parts[1:] if h.lower() not in picked).strip()
    n = f"{module.number:02d}"
    box = [f"````{{admonition}} Module {n} at a glance", ":class: tip", "",
           f"**You build:** {_summary(module)}.", ""]
    for key, label in (("goals", "Goals."), ("prerequisites", "Prerequisites.")):
        if key in picked:  # a body that starts with a list must not glue its first item to the label
            body = picked[key]
            starts_list = re.match(r"^(?:[-*+]|\d+[.)])\s", body) is not None
            box += [f"**{label}**" + ("\n\n" if starts_list else " ") + body, ""]
    box += [f"**Work on it:** `tito module start {n}` opens `{module.notebook_rel}`; "
            f"`tito test module {n}` exports your code and runs the module's tests. This page is that "
            f"notebook as released: each cell you write shows its stub, and the other cells show what "
            f"the reference solution printed and drew.", "````"]
    return [c for c in (intro, "\n".join(box), rest) if c.strip()]


def _summary(module) -> str:
    from tito.course import MODULE_TABLE

    return next(s for n, _, s in MODULE_TABLE if n == module.number)


def chapter_notebook(module, executed: Path | None):
    """The module's chapter: its student notebook, with the reference's outputs on the cells
    whose source is identical to the solution's (never on a solution cell, whose stub stays)."""
    import nbformat

    nb = nbformat.read(module.notebook_path, as_version=4)
    ref_cells = []
    if executed is not None:
        ref_cells = [c for c in nbformat.read(executed, as_version=4).cells if c.cell_type == "code"]
    position = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        for j in range(position, len(ref_cells)):  # the next reference cell with the same source
            if ref_cells[j].source == cell.source:
                cell.outputs = [nbformat.from_dict(o) for o in _clean_outputs(ref_cells[j].get("outputs", []))]
                position = j + 1
                break
    if nb.cells and nb.cells[0].cell_type == "markdown":
        head = [nbformat.v4.new_markdown_cell(text) for text in _header_cells(module, nb.cells[0].source)]
        nb.cells[0:1] = head
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


# --- generated pages ------------------------------------------------------------------------

def cli_reference() -> str:
    """The command reference, from the parser `tito` itself runs (help as `--help` prints it)."""
    import argparse

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "92"
    try:
        from tito.cli import _parser

        parser = _parser()
        lines = ["# Command reference", "",
                 "Generated by `tito book build` from tito's own argument parser, so it always matches the "
                 "installed `tito`: each section is what `tito COMMAND --help` prints.", "",
                 "```text", parser.format_help().rstrip(), "```", ""]

        def walk(p: argparse.ArgumentParser, words: list[str]) -> None:
            for action in p._actions:
                if not isinstance(action, argparse._SubParsersAction):
                    continue
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, child in action.choices.items():
                    command = " ".join([*words, name])
                    lines.extend([f"{'##' if len(words) == 1 else '###'} `{command}`", ""])
                    if helps.get(name):
                        lines.extend([helps[name][0].upper() + helps[name][1:] + ".", ""])
                    lines.extend(["```text", child.format_help().rstrip(), "```", ""])
                    walk(child, [*words, name])

        walk(parser, ["tito"])
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(lines)


def _milestone_stamp(root: Path, milestone) -> str:
    from tito.build import _fingerprint

    return hashlib.sha256((_fingerprint(root) + _sha256(milestone.path)).encode()).hexdigest()


def run_milestones(root: Path, run: bool = True) -> dict[str, dict]:
    """{name: record} for every milestone, run on the reference build into build/book/milestones/
    (not build/milestones/, which may hold runs on the student's own package). A milestone
    is rerun when it or the reference changed; with run=False, whatever records are there."""
    from tito import milestones

    out = book_root(root) / "milestones"
    out.mkdir(parents=True, exist_ok=True)
    records = {}
    package = None
    for m in milestones.discover(root):
        record, stamp = out / f"{m.name}.json", out / f"{m.name}.stamp"
        fresh = record.is_file() and stamp.is_file() and stamp.read_text() == _milestone_stamp(root, m)
        if run and not fresh and (root / "solutions").is_dir():
            if package is None:
                from tito.build import build_solutions

                package = build_solutions(root)
            print(f"tito book: running milestone {m.label} on the reference build for its plot", flush=True)
            record.unlink(missing_ok=True)
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
            env.update({"PYTHONPATH": str(package), "PYTHONSAFEPATH": "1", "MPLBACKEND": "Agg",
                        "TINYTORCH_MILESTONES_OUT": str(out), "TQDM_DISABLE": "1"})
            proc = subprocess.run([sys.executable, str(m.path)], cwd=root, env=env, capture_output=True,
                                  text=True, timeout=milestones.RUN_TIMEOUT_S)
            if proc.returncode == 0 and record.is_file():
                stamp.write_text(_milestone_stamp(root, m))
            else:
                print(f"tito book: warning: milestone {m.name} did not meet its target or crashed "
                      f"(exit code {proc.returncode}):\n" + "\n".join(proc.stderr.strip().splitlines()[-6:]),
                      file=sys.stderr, flush=True)
        try:
            records[m.name] = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    return records


def milestones_page(root: Path, records: dict, src: Path, chapters: dict[str, str]) -> str:
    from tito import milestones

    lines = ["# Milestones", "",
             "Landmark results of deep learning, each reproduced by a short program in `milestones/` that "
             "imports only `tinytorch`, the way your own programs will. On the reference build they run "
             "with `tito milestone run all --solutions` (about a minute on a laptop CPU); on *your* "
             "tinytorch each runs once the modules it needs pass `tito test module NN`, and "
             "`tito milestone list` says which one waits for what.", "",
             "The results and plots below were produced on the reference build when this book was built.", ""]
    for m in milestones.discover(root):
        year = f" ({m.year})" if m.year else ""
        lines += [f"## {m.title}{year}", "", m.summary, ""]
        needs = ", ".join(f"[{slug.replace('_', ' ')}]({chapters[slug]})" if slug in chapters
                          else slug.replace("_", " ") for slug in m.modules)
        lines += [f"- **Target:** {m.target}", f"- **Needs:** {needs}",
                  f"- **Run it:** `tito milestone run {m.name}` (or `--solutions`); the code is "
                  f"`{m.path.relative_to(root).as_posix()}`"]
        record = records.get(m.name)
        plot = Path(record["plot"]) if record and record.get("plot") else None
        if record:
            mark = "met" if record.get("met") else "**not met**"
            lines += [f"- **Result on the reference build:** {record.get('result', '?')} (target {mark})", ""]
        else:
            lines += ["- **Result:** not run when this book was built", ""]
        if plot is not None and plot.is_file():
            _copy_if_changed(plot, src / "milestones" / plot.name)
            lines += [f"```{{figure}} milestones/{plot.name}", f":alt: {m.title}: the plot the milestone saves",
                      ":width: 100%", "", f"{m.label}: the plot `tito milestone run {m.name}` saves.", "```", ""]
    return "\n".join(lines)


# --- the source tree and the build ----------------------------------------------------------

def _mathjax_source() -> Path:
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise TitoError("the book serves MathJax from the jupyter-server-mathjax package, which is not "
                        "installed: pip install -e \".[book]\"") from None
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (static / "MathJax.js").is_file():
        raise TitoError(f"jupyter-server-mathjax has no MathJax.js under {static}; reinstall it.")
    return static


def _nav_title(module, nb) -> str:
    """'05 · DataLoader' for the navigation, from the notebook's title 'Module 05 — DataLoader: ...'."""
    first = nb.cells[0].source.split("\n", 1)[0] if nb.cells else ""
    match = re.match(r"#\s+Module\s+\d+\s+[—-]+\s*([^:]+)", first)
    return f"{module.number:02d} · {match.group(1).strip() if match else module.name}"


def _toc(root: Path, chapters: dict[str, str]) -> str:
    """book/_toc.yml with its Modules part filled: {file: navigation title}."""
    import yaml

    toc = yaml.safe_load((root / "book" / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        if part.get("caption") == MODULES_CAPTION:
            part["chapters"] = [{"file": c, "title": t} for c, t in chapters.items()]
    toc["parts"] = [p for p in toc.get("parts", []) if p.get("chapters")]
    return "# Generated by tito book build from book/_toc.yml.\n" + yaml.safe_dump(toc, sort_keys=False)


def assemble(root: Path, modules, executed: dict[str, Path], records: dict) -> Path:
    """build/book/src: the hand-written pages, the chapters and the generated pages."""
    import nbformat

    src = book_root(root) / "src"
    book = root / "book"
    if not (book / "_toc.yml").is_file():
        raise TitoError(f"{book}/_toc.yml is missing: the book's sources are not in this course folder.")
    wanted = set()
    for path in sorted(book.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.name != "_toc.yml":
            rel = path.relative_to(book)
            if rel.as_posix() == "_config.yml" and not (src / rel).is_file() or \
                    (src / rel).is_file() and (src / rel).read_bytes() != path.read_bytes() and rel.suffix == ".yml":
                shutil.rmtree(book_root(root) / "doctrees", ignore_errors=True)  # a new configuration: read all
            _copy_if_changed(path, src / rel)
            wanted.add(src / rel)
    authoring = root / "solutions" / "AUTHORING.md"
    include = src / "_includes" / "AUTHORING.md"
    _write_if_changed(include, authoring.read_text(encoding="utf-8") if authoring.is_file() else
                      "# Writing a module\n\nThe authors' guide ships with the instructor's checkout of the "
                      "course (`solutions/AUTHORING.md`); this copy of the course has no solutions.\n")
    wanted.add(include)
    mathjax = _mathjax_source()
    for path in mathjax.rglob("*"):
        if path.is_file():
            dest = src / "_mathjax" / "mathjax" / path.relative_to(mathjax)  # html_extra_path: site/mathjax/
            _copy_if_changed(path, dest)
            wanted.add(dest)
    chapters, titles = {}, {}
    for module in modules:
        nb = chapter_notebook(module, executed.get(module.slug))
        dest = src / "modules" / f"{module.slug}.ipynb"
        _write_if_changed(dest, nbformat.writes(nb) + "\n")
        wanted.add(dest)
        chapters[module.slug] = f"modules/{module.slug}"
        titles[f"modules/{module.slug}"] = _nav_title(module, nb)
    for rel, text in {"milestones.md": milestones_page(root, records, src, {s: f"{p}.ipynb" for s, p in
                                                                          chapters.items()}),
                      "cli.md": cli_reference(),
                      "_toc.yml": _toc(root, titles)}.items():
        if _write_if_changed(src / rel, text) and rel in ("_toc.yml", "_config.yml"):
            shutil.rmtree(book_root(root) / "doctrees", ignore_errors=True)  # Sphinx would keep the old toc
        wanted.add(src / rel)
    wanted |= {p for p in (src / "milestones").glob("*.png")}
    for path in sorted(src.rglob("*"), reverse=True):  # what an earlier build left (a removed page)
        if path.is_file() and path not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return src


def _sphinx_build(src: Path, html: Path, jobs: int) -> None:
    code = ("import sys\nfrom pathlib import Path\nfrom jupyter_book.sphinx import build_sphinx\n"
            "src, out = Path(sys.argv[1]), Path(sys.argv[2])\n"
            "r = build_sphinx(src, out, noconfig=True, path_config=str(src / '_config.yml'),\n"
            "                 confoverrides={'external_toc_path': (src / '_toc.yml').as_posix(),\n"
            "                                'latex_individualpages': False},\n"
            "                 doctreedir=out.parent / 'doctrees', builder='html', quiet=True, jobs=int(sys.argv[3]))\n"
            "sys.exit(1 if r else 0)\n")
    try:
        import jupyter_book  # noqa: F401
    except ImportError:
        raise TitoError("the book needs Jupyter Book 1.x: pip install -e \".[book]\"") from None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    proc = subprocess.run([sys.executable, "-c", code, str(src), str(html), "1"],
                          env=env, capture_output=True, text=True)
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    for line in warnings[:20]:
        print(f"tito book: sphinx: {line}", file=sys.stderr)
    if len(warnings) > 20:
        print(f"tito book: sphinx: ... and {len(warnings) - 20} more warnings", file=sys.stderr)
    if proc.returncode != 0 or not (html / "index.html").is_file():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise TitoError(f"jupyter-book could not build the site:\n{tail}")


def build_book(root: Path, modules: list | None = None, executed: dict | None = None, jobs: int = 2,
               milestones: bool = True) -> Path:
    """Build the site into build/book/html; returns the path of its index.html.

    `modules`: the chapters to build (default: every available module); `executed`:
    {slug: executed solution notebook} from the caller (e.g. tito verify, which has just run
    each solution notebook); the others come from the cache or are executed now."""
    from tito.course import available_modules
    from tito.locks import locked

    modules = available_modules(root) if modules is None else modules
    # what the build needs, before minutes of running notebooks
    if importlib.util.find_spec("jupyter_book") is None:
        raise TitoError("the book needs Jupyter Book 1.x: pip install -e \".[book]\"")
    _mathjax_source()
    start = time.perf_counter()
    with locked(book_root(root) / "book.lock"):  # two builds at once wait for each other
        done = executed_notebooks(root, modules, jobs=jobs, given=executed)
        records = run_milestones(root, run=milestones)
        src = assemble(root, modules, done, records)
        html = book_root(root) / "html"
        if html.exists():  # pages of an earlier build (another --modules) must not linger
            shutil.rmtree(html)
        print(f"tito book: building the site from {src} ...", flush=True)
        _sphinx_build(src, html, jobs)
    index = html / "index.html"
    print(f"tito book: built {len(modules)} chapter(s) in {time.perf_counter() - start:.0f} s")
    return index


def book_command(action: str | None, modules: list[str] | None, jobs: int, no_milestones: bool,
                 check: bool) -> int:
    from tito.course import find_root, resolve

    if action != "build":
        raise TitoError("say `tito book build` (options: --modules NN ..., --jobs N, --no-milestones, --check).")
    root = find_root()
    chosen = None
    if modules:
        chosen = sorted({resolve(spec, root).number: resolve(spec, root) for spec in modules}.values(),
                        key=lambda m: m.number)
    index = build_book(root, chosen, jobs=jobs, milestones=not no_milestones)
    if check:
        problems = check_site(index.parent, root)
        if problems:
            print(f"tito book: {len(problems)} problem(s) in the built site:", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            print(index)
            return 1
        print("tito book: check_site found no problems.")
    print(index)
    return 0


# --- checking a built site ------------------------------------------------------------------

TRIVIAL = re.compile(r"^(?:pass|return|break|continue|else:|try:|finally:|[()\[\]{},:;\s]*)$")
BEGINS, ENDS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS"), ("END SOLUTION", "END HIDDEN TESTS")
TAG = re.compile(r"<[^>]+>")


def _norm(line: str) -> str:
    return " ".join(line.split())


def solution_lines(root: Path) -> dict[str, set[str]]:
    """{slug: significant lines inside the solution and hidden-test regions} of every available
    module (a solution cell without regions counts whole: nbgrader replaces it whole), less
    the lines that a released student notebook shows anyway."""
    import jupytext
    import nbformat

    from tito.course import available_modules

    secret, shown = {}, []
    for module in available_modules(root):
        if module.notebook_path.is_file():
            for cell in nbformat.read(module.notebook_path, as_version=4).cells:
                shown.extend(_norm(line) for line in cell.source.split("\n"))
        if not module.solution_path.is_file():
            continue
        found = set()
        for cell in jupytext.read(module.solution_path, fmt="py:percent").cells:
            lines = cell.source.split("\n")
            inside = bool(cell.metadata.get("nbgrader", {}).get("solution")) and not any(
                b in line for line in lines for b in BEGINS)
            for line in lines:
                if any(b in line for b in BEGINS):
                    inside = True
                elif any(e in line for e in ENDS):
                    inside = False
                elif inside:
                    found.add(_norm(line))
        secret[module.slug] = found
    public = "\n".join(shown)  # a line a notebook shows anyway, even inside prose (a table cell)
    return {slug: {s for s in lines if len(s) >= 8 and not TRIVIAL.match(s) and s not in public}
            for slug, lines in secret.items()}


def _page_text(raw: str) -> str:
    return html_lib.unescape(TAG.sub("", raw))


EXTERNAL = r"""(?:https?:)?//"""
NETWORK_PATTERNS = [
    (re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?" + EXTERNAL, re.I), "a <script src> from the network"),
    (re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?" + EXTERNAL, re.I), "a <link href> to the network"),
    (re.compile(r"<img\b[^>]*\bsrc\s*=\s*[\"']?" + EXTERNAL, re.I), "an <img src> from the network"),
    (re.compile(r"<(?:iframe|embed|object|video|audio|source|track)\b[^>]*\b(?:src|data)\s*=\s*[\"']?" + EXTERNAL, re.I),
     "a frame or media element from the network"),
    (re.compile(r"url\(\s*[\"']?" + EXTERNAL, re.I), "a CSS url() from the network"),
    (re.compile(r"@import\s+(?:url\()?\s*[\"']?" + EXTERNAL, re.I), "a CSS @import from the network"),
]
LINK = re.compile(r"<(a|link|img|script|source)\b[^>]*?\b(href|src)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.I)


def _network_problems(rel: str, text: str) -> list[str]:
    problems = []
    for pattern, what in NETWORK_PATTERNS:
        match = pattern.search(text)
        if match:
            snippet = text[match.start(): match.start() + 100].split("\n")[0]
            problems.append(f"{rel}: {what}: {snippet}")
    return problems


def _link_problems(html_dir: Path, page: Path, text: str) -> list[str]:
    problems = []
    rel = page.relative_to(html_dir).as_posix()
    for tag, attr, value in LINK.findall(text):
        url = html_lib.unescape(value.strip("\"'"))
        parts = urlsplit(url)
        if parts.scheme or url.startswith(("//", "#")) or not parts.path:
            continue  # external links (checked as fetches above), anchors, mailto:, data:
        target = (page.parent / unquote(parts.path))
        if parts.path.endswith("/"):
            target = target / "index.html"
        try:
            target.resolve().relative_to(html_dir.resolve())
        except ValueError:
            problems.append(f"{rel}: <{tag} {attr}={url}> points outside the site")
            continue
        if not target.is_file():
            problems.append(f"{rel}: <{tag} {attr}={url}> leads nowhere (no {target.relative_to(html_dir)})")
    return problems


def static_problems(html_dir: Path, root: Path | None) -> list[str]:
    """Checks (a) solution text, (b) network fetches, (c) internal links, on the files alone."""
    html_dir = Path(html_dir)
    problems = []
    secret = solution_lines(root) if root is not None else {}
    pages = sorted(p for p in html_dir.rglob("*.html") if p.relative_to(html_dir).parts[0] != "_static")
    if not pages:
        return [f"{html_dir}: no HTML pages (was the book built?)"]
    for page in pages:
        rel = page.relative_to(html_dir).as_posix()
        raw = page.read_text(encoding="utf-8", errors="replace")
        text = "\n".join(_norm(line) for line in _page_text(raw).split("\n"))
        for slug, wanted in secret.items():
            leaked = sorted(line for line in wanted if line in text)
            if leaked:
                problems.append(f"{rel}: {len(leaked)} line(s) of {slug}'s solution, e.g. {leaked[0]!r}")
        problems += _network_problems(rel, raw)
        problems += _link_problems(html_dir, page, raw)
    for sheet in sorted(html_dir.rglob("*.css")):
        problems += _network_problems(sheet.relative_to(html_dir).as_posix(),
                                      sheet.read_text(encoding="utf-8", errors="replace"))
    if root is not None:
        problems += _picture_problems(html_dir, root)
    return problems


def _picture_problems(html_dir: Path, root: Path) -> list[str]:
    """(e) A chapter whose notebook draws a figure in a cell the student does not write shows
    at least one picture (the reference's output), where the course has its solutions."""
    import nbformat

    from tito.course import available_modules

    problems = []
    for module in available_modules(root):
        page = html_dir / "modules" / f"{module.slug}.html"
        if not page.is_file() or not module.solution_path.is_file() or not module.notebook_path.is_file():
            continue
        draws = any(c.cell_type == "code" and "plt.show()" in c.source
                    and not c.metadata.get("nbgrader", {}).get("solution")
                    for c in nbformat.read(module.notebook_path, as_version=4).cells)
        if draws and "<img" not in page.read_text(encoding="utf-8", errors="replace"):
            problems.append(f"modules/{module.slug}.html: the notebook draws figures, but the page shows "
                            f"no picture (did the executed solution notebook keep its image outputs?)")
    return problems


# --- rendering in headless chromium ---------------------------------------------------------

def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _Server:
    """The site over http on 127.0.0.1 (how it is viewed when served; fonts load as they would)."""

    def __init__(self, folder: Path):
        import functools
        import threading
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Quiet(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


CHROMIUM_TIMEOUT_S, CHROMIUM_TRIES = 120, 3


def _chromium_run(browser: str, url: str, *args: str, budget_ms: int = 15000) -> subprocess.CompletedProcess | None:
    """One page in headless chromium; None when every try ran past CHROMIUM_TIMEOUT_S.
    Headless chromium now and then never finishes a page load (seen once in CI, a page that
    loads in seconds): each try gets a fresh profile, and a stuck one is killed with every
    process it started, so that none is left spinning on the machine."""
    import signal
    import tempfile

    for _ in range(CHROMIUM_TRIES):
        with tempfile.TemporaryDirectory(prefix="tito-chromium-") as profile:
            cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
                   "--no-first-run", "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
                   f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *args, url]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            try:
                out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                out = None
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its renderer and helper processes too
            if out is not None:
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            proc.communicate()
    return None


RAW_MATH = re.compile(r"\\\(|\\\[|\$\$|(?<![\\\w])\$[^$\n]{1,80}\$")  # \( \[ $$ or $...$ left as text
HIDDEN = re.compile(r"<(script|style|pre|code|textarea)\b.*?</\1>", re.I | re.S)


def _dom_problems(rel: str, dom: str, math_count: int) -> list[str]:
    """What is wrong with one page as chromium rendered it; `math_count`: the math elements
    in the built page (each must come out typeset)."""
    problems = []
    body = dom.split("<body", 1)[-1]
    shown = HIDDEN.sub("", body)
    visible = _page_text(shown)
    if len(" ".join(visible.split())) < 200:
        problems.append(f"{rel}: the page renders (almost) no text in chromium")
    if math_count:
        typeset = len(re.findall(r"id=\"MathJax-Element-\d+-Frame\"", dom))
        if not typeset:
            problems.append(f"{rel}: the page has math but chromium shows no typeset math (MathJax did not run)")
        elif typeset < math_count:
            problems.append(f"{rel}: MathJax typeset {typeset} of the page's {math_count} formulas")
        if "Math Processing Error" in visible or re.search(r"class=\"[^\"]*\b(?:MathJax_Error|merror)\b", shown):
            problems.append(f"{rel}: MathJax reports an error typesetting the page's math")
        raw = RAW_MATH.search(visible)
        if raw:
            problems.append(f"{rel}: untypeset TeX left in the text: "
                            f"{visible[max(0, raw.start() - 40): raw.start() + 40]!r}")
    return problems


def _blank(png: Path) -> bool:
    """True when a screenshot is (nearly) one colour."""
    from PIL import Image

    with Image.open(png) as image:
        colours = image.convert("L").resize((160, 160)).getcolors(160 * 160) or []
    top = max((count for count, _ in colours), default=160 * 160)
    return top > 0.99 * 160 * 160


WIDTHS = ((1280, 900), (390, 844))


def render_problems(html_dir: Path, pages: list[str] | None = None, shots: Path | None = None) -> list[str]:
    """Check (d): load pages in headless chromium (no network: a dead proxy), check the DOM for
    typeset math and text, and screenshot the landing page, the first chapter with math and
    the milestones page at a laptop and a phone width (saved under `shots`)."""
    html_dir = Path(html_dir)
    browser = chromium()
    if browser is None:
        return ["chromium is not installed, so the pages could not be checked in a browser "
                "(Debian/Ubuntu: apt-get install chromium)"]
    has_math = {}
    for p in html_dir.rglob("*.html"):
        count = p.read_text(encoding="utf-8", errors="replace").count('class="math notranslate')
        if count:
            has_math[p.relative_to(html_dir).as_posix()] = count
    chapters = sorted(p.relative_to(html_dir).as_posix() for p in (html_dir / "modules").glob("*.html")) \
        if (html_dir / "modules").is_dir() else []
    math_chapters = [c for c in chapters if c in has_math]
    if pages is None:
        pages = ["index.html", *math_chapters, "milestones.html"]
        pages = [p for p in dict.fromkeys(pages) if (html_dir / p).is_file()]
    screenshot = [p for p in ["index.html", (math_chapters or chapters or [None])[0], "milestones.html"]
                  if p and p in pages]
    shots = Path(shots) if shots else html_dir.parent / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    runs = []  # (page, width, height, dump the DOM?, screenshot?)
    for rel in pages:
        runs.append((rel, *WIDTHS[0], True, rel in screenshot))
        if rel in screenshot:
            runs += [(rel, *size, False, True) for size in WIDTHS[1:]]

    def one(run) -> list[str]:
        rel, width, height, dump, shoot = run
        png = shots / f"{rel.replace('/', '_').removesuffix('.html')}-{width}.png"
        png.unlink(missing_ok=True)
        args = (["--dump-dom"] if dump else []) + ([f"--screenshot={png}"] if shoot else [])
        proc = _chromium_run(browser, f"{base}/{rel}", *args, f"--window-size={width},{height}")
        if proc is None:
            return [f"{rel}: chromium did not finish loading the page at width {width} ({CHROMIUM_TRIES} tries of "
                    f"{CHROMIUM_TIMEOUT_S} s each)"]
        found = []
        if dump:
            if proc.returncode != 0 or "<body" not in proc.stdout:
                return [f"{rel}: chromium could not load the page (exit code {proc.returncode}): "
                        + " ".join(proc.stderr.strip().splitlines()[-2:])]
            found += _dom_problems(rel, proc.stdout, has_math.get(rel, 0))
        if shoot:
            if not png.is_file():
                found.append(f"{rel}: chromium wrote no screenshot at width {width}")
            elif _blank(png):
                found.append(f"{rel}: blank at width {width} ({png})")
        return found

    from concurrent.futures import ThreadPoolExecutor

    problems = []
    with _Server(html_dir) as base, ThreadPoolExecutor(max_workers=3) as pool:
        for found in pool.map(one, runs):
            problems += found
    return problems


def check_site(html_dir: Path, root: Path | None = None, *, browser: bool = True) -> list[str]:
    """Everything wrong with a built site; empty when it is good.

    (a) no line of a solution or hidden-test region of any available module appears in a
        page (after unescaping; lines a student notebook shows anyway do not count);
    (b) nothing is fetched from the network: no <script src>, <link href>, <img src>, frame,
        CSS url() or @import pointing at http(s) or protocol-relative URLs;
    (c) every internal link, stylesheet, script and image resolves to a file of the site;
    (e) a chapter whose notebook draws figures shows the reference's pictures;
    (d) (browser=True) in headless chromium, without network, pages show text, math on every
        chapter with math is typeset (no raw TeX left), screenshots at 1280 and 390 pixels
        wide are not blank.
    `root` is the course whose solutions (a) looks for; default: the current course. Screenshots
    go to html_dir's sibling screenshots/ (build/book/screenshots)."""
    html_dir = Path(html_dir)
    if root is None:
        from tito.course import find_root

        root = find_root()
    problems = static_problems(html_dir, root)
    if browser:
        problems += render_problems(html_dir)
    return problems


