"""ObjectStore: objects by kind and key, the per-kind version, and the change log readers catch
up from."""

from __future__ import annotations

from kubesched.api import ObjectMeta, StorageClass
from kubesched.framework import ObjectStore
from kubesched.framework._store import CHANGE_LOG_SIZE


def sc(name: str, provisioner: str = "p") -> StorageClass:
    return StorageClass(metadata=ObjectMeta(name=name), provisioner=provisioner)


def test_changes_since_a_version_oldest_first() -> None:
    store = ObjectStore()
    assert store.changes(StorageClass, 0) == []
    a, b, a2 = sc("a"), sc("b"), sc("a", "q")
    store.set(a)
    start = store.version(StorageClass)
    store.set(b)
    store.set(a2)
    store.delete(StorageClass, "b")
    assert store.delete(StorageClass, "missing") is None  # not a change
    assert store.changes(StorageClass, start) == [(None, b), (a, a2), (b, None)]
    assert store.changes(StorageClass, store.version(StorageClass)) == []
    assert list(store.list(StorageClass)) == [a2]


def test_changes_beyond_the_log_say_read_everything_again() -> None:
    store = ObjectStore()
    for i in range(CHANGE_LOG_SIZE + 5):
        store.set(sc(f"s{i}"))
    assert store.changes(StorageClass, 0) is None
    assert store.changes(StorageClass, -1) is None
    recent = store.changes(StorageClass, store.version(StorageClass) - 2)
    assert recent is not None
    assert [new.metadata.name for _, new in recent if new is not None] == [
        f"s{CHANGE_LOG_SIZE + 3}",
        f"s{CHANGE_LOG_SIZE + 4}",
    ]
