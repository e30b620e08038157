"""The judge (tito/judge.py, tito/remote.py): tests run in a process that never imports the
package under test, against a package that tries to forge its verdicts, and what a test can
do with the package's objects is what it could do in one process."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A package named like the course's, which forges what it can reach when it is imported.
PACKAGE = '''
import collections, contextlib, sys
import numpy as np
import numpy.testing
import pytest, _pytest.runner

numpy.testing.assert_allclose = numpy.testing.assert_array_equal = lambda *a, **k: None
pytest.raises = lambda *a, **k: contextlib.suppress(BaseException)
_real = _pytest.runner.CallInfo.from_call
_pytest.runner.CallInfo.from_call = classmethod(lambda cls, func, when, reraise=None: _real(lambda: None, when))


class ShapeError(ValueError):
    pass


class Box:
    """A tensor-like object."""

    def __init__(self, values):
        self.store = np.asarray(values, dtype=np.float64)
        self.items = []

    def first(self):
        return float(self.store[0])

    def __add__(self, other):
        return Box(self.store + (other.store if isinstance(other, Box) else other))

    def __len__(self):
        return len(self.store)


class Module:
    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return self.forward(x)


def double(x):
    return x * 2


def wrong_double(x):
    return x * 3


def check_shape(box, n):
    if len(box) != n:
        raise ShapeError(f"expected {n} values, got {len(box)}")
    return True


def fill(d):
    d["filled"] = True
    return d


def swallow(callback):
    try:
        callback()
    except Exception:
        pass
    return "swallowed"


def peek(obj):
    return obj._secret


def scale_in_place(array, k):
    array *= k


Pair = collections.namedtuple("Pair", ["a", "b"])
default_pair = Pair(1, 2)


def second(pair):
    return pair.b
'''

CASES = '''
import os
import sys
import numpy as np
import pytest
import tinytorch as tt

TRUSTED = os.environ["TITO_TRUSTED_TESTING"]


def test_a_right_answer_passes():
    assert tt.double(21) == 42


def test_a_wrong_answer_fails_though_the_package_patched_the_helpers():
    np.testing.assert_allclose(tt.wrong_double(np.arange(3.0)), np.arange(3.0) * 2)


def test_a_missing_exception_fails_though_the_package_patched_pytest_raises():
    with pytest.raises(tt.ShapeError):
        tt.check_shape(tt.Box([1.0, 2.0]), 2)


def test_the_package_is_never_imported_here():
    package = [name for name, m in sys.modules.items() if name.split(".")[0] == "tinytorch"]
    assert "tinytorch" in package
    for name in package:  # stand-ins, or the course's own assertion helpers
        module = sys.modules[name]
        assert type(module).__name__ == "ModuleProxy" or module.__file__ == TRUSTED, name
    package_dir = os.environ["PACKAGE_UNDER_TEST"]
    loaded = [m for m in list(sys.modules.values()) if type(m).__name__ != "ModuleProxy"]  # a proxy's file is there
    assert not any(str(getattr(m, "__file__", "") or "").startswith(package_dir) for m in loaded)


def test_exceptions_keep_their_class_and_message():
    with pytest.raises(tt.ShapeError, match="expected 3 values, got 2") as info:
        tt.check_shape(tt.Box([1.0, 2.0]), 3)
    assert isinstance(info.value, ValueError)


def test_objects_keep_identity_type_and_shared_memory():
    box = tt.Box([1.0, 2.0, 3.0])
    assert type(box) is tt.Box and isinstance(box, tt.Box) and type(box).__name__ == "Box"
    assert box.store is box.store
    box.store[0] = 10.0  # through the array the test holds
    assert box.first() == 10.0
    total = box + 1.0
    np.testing.assert_array_equal(total.store, [11.0, 3.0, 4.0])
    assert len(total) == 3


def test_containers_the_package_changes_are_the_tests_own():
    d = {"a": 1}
    assert tt.fill(d) is d and d == {"a": 1, "filled": True}
    box = tt.Box([1.0])
    box.items.append(5)  # a list an object holds is changed where it lives
    assert box.items == [5]
    array = np.ones(3)
    tt.scale_in_place(array, 4.0)
    np.testing.assert_array_equal(array, [4.0, 4.0, 4.0])


def test_a_subclass_runs_its_methods_here():
    class Twice(tt.Module):
        def __init__(self):
            super().__init__()
            self.seen = []

        def forward(self, x):
            self.seen.append(x)
            return tt.double(x)

    model = Twice()
    assert model(4) == 8 and model(5) == 10
    assert model.calls == 2 and model.seen == [4, 5]


def test_an_assertion_the_package_swallows_still_fails_the_test():
    def callback():
        assert False, "checked inside a callback"

    assert tt.swallow(callback) == "swallowed"


def test_the_package_cannot_read_the_tests_private_attributes():
    class Thing:
        _secret = "the expected answer"

    with pytest.raises(AttributeError, match="_secret"):
        tt.peek(Thing())


def test_a_namedtuple_class_met_first_through_a_value_is_still_its_class():
    assert tt.default_pair.a == 1  # the class travels with a value first ...
    made = tt.Pair(a=3, b=4)  # ... then by itself
    assert isinstance(made, tt.Pair) and isinstance(tt.default_pair, tt.Pair)
    assert tt.second(made) == 4
'''

EXPECTED = {
    "test_a_right_answer_passes": True,
    "test_a_wrong_answer_fails_though_the_package_patched_the_helpers": False,
    "test_a_missing_exception_fails_though_the_package_patched_pytest_raises": False,
    "test_the_package_is_never_imported_here": True,
    "test_exceptions_keep_their_class_and_message": True,
    "test_objects_keep_identity_type_and_shared_memory": True,
    "test_containers_the_package_changes_are_the_tests_own": True,
    "test_a_subclass_runs_its_methods_here": True,
    "test_an_assertion_the_package_swallows_still_fails_the_test": False,
    "test_the_package_cannot_read_the_tests_private_attributes": True,
    "test_a_namedtuple_class_met_first_through_a_value_is_still_its_class": True,
}


def _judge(tmp_path, package_source, cases_source):
    package = tmp_path / "pkg"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(package_source)
    (package / "tinytorch" / "testing.py").write_text("")
    tests = tmp_path / "cases"
    tests.mkdir()
    (tests / "test_cases.py").write_text(cases_source)
    answerer = {"argv": [sys.executable, str(ROOT / "tito" / "remote.py"), "{read}", "{write}"],
                "env": dict(os.environ, PYTHONPATH=str(package)), "cwd": str(tmp_path)}
    env = dict(os.environ, PYTHONPATH=str(ROOT), TITO_ANSWERER=json.dumps(answerer),
               TITO_TRUSTED_TESTING=str(ROOT / "tinytorch" / "testing.py"), PACKAGE_UNDER_TEST=str(package))
    report = tmp_path / "report.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-p", "tito.judge", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tests), f"--junitxml={report}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    outcomes = {case.get("name"): not any(child.tag in ("failure", "error", "skipped") for child in case)
                for case in ET.parse(report).getroot().iter("testcase")}
    return outcomes, proc.stdout + proc.stderr


def test_verdicts_are_the_judges_and_objects_behave_as_in_one_process(tmp_path):
    outcomes, log = _judge(tmp_path, PACKAGE, CASES)
    assert outcomes == EXPECTED, log[-3000:]


def test_a_package_that_breaks_the_protocol_fails_its_tests_and_nothing_else(tmp_path):
    package = PACKAGE + "\ndef garbage():\n    import os, sys\n    os.write(int(sys.argv[2]), b'\\xff' * 64)\n    return 1\n"
    cases = ("import tinytorch as tt\n\n"
             "def test_before():\n    assert tt.double(1) == 2\n\n"
             "def test_garbage():\n    assert tt.garbage() == 1\n\n"
             "def test_after():\n    assert tt.double(2) == 4\n")
    outcomes, log = _judge(tmp_path, package, cases)
    assert outcomes == {"test_before": True, "test_garbage": False, "test_after": False}, log[-3000:]
    assert "broke the protocol" in log or "ended" in log, log[-3000:]


@pytest.mark.parametrize("dtype", ["object", "V8"])
def test_arrays_that_could_carry_code_are_refused(dtype):
    from tito.remote import RemoteError, _dtype

    with pytest.raises(RemoteError, match="cannot travel"):
        _dtype(np_dtype(dtype))


def np_dtype(name):
    import numpy as np

    return np.dtype(name).str
