import orders


def test_round_trip(settings):
    sent = [{"id": i, "item": f"book-{i}"} for i in range(10)]
    orders.publish_confluent(settings, sent)
    got = orders.read_confluent(settings, len(sent))
    assert sorted(got, key=lambda o: o["id"]) == sent
