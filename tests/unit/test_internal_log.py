from samsa.coordinator.internal_log import java_string_hash, partition_for


def test_java_string_hash_vectors():
    # Values of Java's String.hashCode for these strings.
    assert java_string_hash("") == 0
    assert java_string_hash("test-group") == 627841412
    assert java_string_hash("my-transactional-id") == -959806496
    assert java_string_hash("txn-1") == 110810510
    assert java_string_hash("polygenelubricants") == -(1 << 31)


def test_partition_for_vectors():
    cases = {
        "": 0,
        "test-group": 12,
        "my-transactional-id": 46,
        "txn-1": 10,
        "spark-kafka-source-1": 22,
        "polygenelubricants": 0,
        "😀id": 44,
    }
    for key, expected in cases.items():
        assert partition_for(key, 50) == expected, key
