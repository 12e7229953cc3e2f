import orders


async def test_round_trip(settings):
    sent = [{"id": i, "item": f"lamp-{i}"} for i in range(10)]
    await orders.publish_aiokafka(settings, sent)
    got = await orders.read_aiokafka(settings, len(sent))
    assert sorted(got, key=lambda o: o["id"]) == sent
