"""The doorkeeper: a per-shape cache keeps a key from its second use on."""

from kubesched.framework._admission import _MAX_SEEN, Doorkeeper


def test_a_key_is_admitted_on_its_second_use() -> None:
    door = Doorkeeper()
    assert not door.admit("a")
    assert not door.admit("b")
    assert door.admit("a")
    assert door.admit("a")


def test_keys_seen_once_are_forgotten_when_too_many() -> None:
    door = Doorkeeper()
    assert not door.admit("first")
    for i in range(_MAX_SEEN):
        door.admit(i)
    assert not door.admit("first")
