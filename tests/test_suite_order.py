"""The order the suite's files run in (``tests/conftest.py``): the most expensive first, so that
the test processes end together on the cheap ones."""

from __future__ import annotations

from tests.conftest import file_cost


def test_the_files_are_collected_whole_and_the_most_expensive_first(request):
    items = request.session.items
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = [item.nodeid.split("::")[0] for item in items]
    starts = [f for i, f in enumerate(order) if i == 0 or order[i - 1] != f]
    assert len(starts) == len(files), "a file's tests are split"
    costs = [file_cost(files[f]) for f in starts]
    assert costs == sorted(costs, reverse=True)
    here = files[request.node.nodeid.split("::")[0]]
    assert file_cost(here) == len(here) == 1  # one test, not slow: a second
    if "tests/test_chaos.py" in files:  # the whole suite: a file of one slow test before this one
        assert starts.index("tests/test_chaos.py") < starts.index(request.node.nodeid.split("::")[0])
