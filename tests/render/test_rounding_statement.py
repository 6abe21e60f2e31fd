"""The worksheet states the rounding rule the grader applies, in the worksheet's language."""

import pytest

from qkvquiz.render.markdown import worksheet_markdown
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet


@pytest.mark.parametrize("lang, says", [
    ("en", ["Rounding as you go is fine", "each answer you wrote as you wrote it", "each value not asked to the\nplaces its tolerance asks"]),
    ("zh", ["可以边算边舍入", "你写下的答案按你写的值计", "未要求作答的值按其容差要求的位数舍入"]),
])
def test_the_worksheet_says_rounding_as_you_go_is_fine(lang, says):
    spec = parse_spec({"title": "t", "lang": lang, "items": [{"family": "backprop.softmax"}]})
    text = worksheet_markdown(build_worksheet(spec, ["ada"], 1), 0)
    for phrase in says:
        assert phrase in text
    assert "\n\n" + says[0][:4] in text  # a paragraph of its own
