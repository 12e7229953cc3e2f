"""The classic consumer protocol pieces of `samsa consume --group`: Kafka's RangeAssignor
and the ConsumerProtocol subscription and assignment encodings."""

from __future__ import annotations

from samsa.broker.admin import groups, membership


def test_range_assignment_as_kafkas_range_assignor() -> None:
    # RangeAssignor's javadoc example: C0, C1 subscribed to t0 and t1, three partitions each
    assert membership.range_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]},
                                   {"t0": 3, "t1": 3}) == {
        "C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}
    assert membership.range_assign({"b": ["t"], "a": ["t"], "c": ["t", "u"]},
                                   {"t": 5, "u": 2}) == {
        "a": {"t": [0, 1]}, "b": {"t": [2, 3]}, "c": {"t": [4], "u": [0, 1]}}
    assert membership.range_assign({"a": ["t"], "b": ["t"]}, {"t": 1}) == {
        "a": {"t": [0]}, "b": {}}


def test_subscription_and_assignment_round_trip() -> None:
    assert membership.subscribed_topics(membership.subscription(["orders", "x"])) == [
        "orders", "x"]
    data = membership.assignment({"orders": [0, 2], "x": [1]})
    assert groups.consumer_assignment(data) == [{"topic": "orders", "partitions": [0, 2]},
                                                {"topic": "x", "partitions": [1]}]
