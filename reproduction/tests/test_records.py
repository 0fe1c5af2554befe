"""reproduction/records.py: a record is written whole, also when several writers share its path."""

from __future__ import annotations

import json
import threading

from reproduction.records import write_json


def test_writers_sharing_a_path_each_rename_their_own_file_and_leave_a_whole_record(tmp_path):
    path, errors = tmp_path / "prepared.json", []

    def write(n):
        try:
            for i in range(200):
                write_json(path, {"writer": n, "i": i})
        except OSError as e:  # the old shared PATH.tmp: one writer renamed the other's file away
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and json.loads(path.read_text())["i"] == 199
    assert [p.name for p in tmp_path.iterdir()] == ["prepared.json"]  # no temporary file left
