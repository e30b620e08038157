"""A graded submission into the course folder's own nbgrader gradebook and folders.

`tito grade` grades each submission in a folder of its own (one student's code never
touches another's grade); this copies the result into the course folder afterwards, in
nbgrader's layout, so that nbgrader's formgrader lists the grades and notebooks and
`nbgrader release_feedback` finds the feedback (tito's pages are already in feedback/).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from tito.locks import locked


def _copy_assignment(one, main, slug: str, name: str) -> None:
    """The assignment's notebooks and cells, as nbgrader's generate_assignment recorded them
    for `slug`, under the name `name`."""
    assignment = one.find_assignment(slug)
    main.update_or_create_assignment(name, duedate=assignment.duedate)
    slug_in, slug = slug, name
    for nb in one.find_assignment(slug_in).notebooks:
        main.update_or_create_notebook(nb.name, slug)
        for c in nb.grade_cells:
            main.update_or_create_grade_cell(c.name, nb.name, slug, max_score=c.max_score, cell_type=c.cell_type)
        for c in nb.solution_cells:
            main.update_or_create_solution_cell(c.name, nb.name, slug)
        for c in nb.task_cells:
            main.update_or_create_task_cell(c.name, nb.name, slug, max_score=c.max_score, cell_type=c.cell_type)
        for c in nb.source_cells:
            main.update_or_create_source_cell(c.name, nb.name, slug, cell_type=c.cell_type, locked=c.locked,
                                              source=c.source, checksum=c.checksum)


def publish(course_dir: Path, run_folder: Path, slug: str, student: str, name: str) -> None:
    """Student `student`'s autograded `slug` from the nbgrader folder `run_folder` into
    `course_dir` as assignment `name` (nbgrader exchange's): gradebook.db (their previous
    submission of it replaced), autograded/, and source/ when the course has none."""
    from nbgrader.api import Gradebook, MissingEntry

    with locked(course_dir / "gradebook.lock"):
        with Gradebook(f"sqlite:///{run_folder / 'gradebook.db'}") as one, \
                Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as main:
            _copy_assignment(one, main, slug, name)
            main.update_or_create_student(student)
            try:
                main.remove_submission(name, student)
            except MissingEntry:
                pass
            submitted = one.find_submission(slug, student)
            main.add_submission(name, student, timestamp=submitted.timestamp)
            for nb in submitted.notebooks:
                for grade in nb.grades:
                    mine = main.find_grade(grade.name, nb.name, name, student)
                    mine.auto_score, mine.manual_score = grade.auto_score, grade.manual_score
            main.db.commit()
        dest = course_dir / "autograded" / student / name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(run_folder / "autograded" / student / slug, dest)
        if not (course_dir / "source" / name).exists():
            shutil.copytree(run_folder / "source" / slug, course_dir / "source" / name)
