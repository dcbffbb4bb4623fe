"""The doorkeeper: a per-shape cache keeps a key asked about again soon enough."""

from kubesched.framework._admission import _MAX_SEEN, Doorkeeper


def test_a_key_is_admitted_when_asked_about_again_within_the_window() -> None:
    door = Doorkeeper(window=2)
    assert not door.admit("a")
    assert not door.admit("b")
    assert door.admit("a")
    assert door.admit("a")


def test_a_key_asked_about_again_after_the_window_is_not() -> None:
    door = Doorkeeper(window=2)
    assert not door.admit("a")
    for other in ("b", "c"):
        assert not door.admit(other)
    # Three questions since "a": it would have been dropped before its reuse.
    assert not door.admit("a")
    # Now it was asked about just before.
    assert door.admit("a")


def test_keys_are_forgotten_when_too_many() -> None:
    door = Doorkeeper(window=_MAX_SEEN * 2)
    assert not door.admit("first")
    for i in range(_MAX_SEEN):
        door.admit(i)
    assert not door.admit("first")
