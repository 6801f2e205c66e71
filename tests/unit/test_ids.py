from memray.core.ids import is_memory_id, new_id


def test_ids_are_uuid7_and_strictly_increasing() -> None:
    ids = [new_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(is_memory_id(i) and i[14] == "7" for i in ids)
    assert not is_memory_id('x" or id != "')
    assert not is_memory_id(None)
