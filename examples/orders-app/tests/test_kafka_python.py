import orders


def test_round_trip(settings):
    sent = [{"id": i, "item": f"chair-{i}"} for i in range(10)]
    orders.publish_kafka_python(settings, sent)
    got = orders.read_kafka_python(settings, len(sent))
    assert sorted(got, key=lambda o: o["id"]) == sent


def test_survives_a_broker_restart(samsa_broker, settings):
    orders.publish_kafka_python(settings, [{"id": 1, "item": "desk"}])
    samsa_broker.restart()  # a clean stop: the record is on disk
    assert orders.read_kafka_python(settings, 1) == [{"id": 1, "item": "desk"}]
