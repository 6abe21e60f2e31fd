"""What the LMS intake tests share: the class whose hand-ins the downloads hold."""

from __future__ import annotations

import pytest

from ..helpers import make_key
from ..lms_corpus import STUDENTS


@pytest.fixture(scope="module")
def class_key():
    """The key of the class ``STUDENTS`` (ada, alan, grace, li) and its JSON document."""
    return make_key(students=STUDENTS)
