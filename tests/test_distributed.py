"""`data inspect URL --full --scheduler ADDRESS` (issue 26): the full pass on a 2-worker Dask
LocalCluster gives the one-machine pass's numbers, resumes from its journal without redoing a
finished unit, and survives a worker killed mid-pass (the scheduler gives its task to the other).

The one-machine pass is `shards.inspect_units` (the `data inspect` path without --full), whose
figures tests/test_locations.py and tests/test_inspect.py check against how the files were made."""

from __future__ import annotations

import json
import os
import random
import signal

import pytest

from trainplan.measure import probe, shards

distributed = pytest.importorskip("distributed", reason="dask distributed is not installed (the distributed extra)")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    wds = pytest.importorskip("webdataset")
    root = tmp_path_factory.mktemp("dcorpus")
    (root / "video").mkdir()
    for s in range(2):
        with wds.TarWriter(str(root / "video" / f"shard-{s}.tar")) as w:
            for i in range(4):
                gop = (8, 12, 15)[(s + i) % 3]
                clip = probe.synthesize_clip(probe.ClipFormat(128, 96, 25.0, 150e3, gop), 24 + 6 * i, seed=s * 7 + i)
                w.write({"__key__": f"k{s}_{i}", "mp4": clip.data})
    (root / "text").mkdir()
    rng = random.Random(1)
    words = [f"w{i}" for i in range(3000)]
    docs = [" ".join(rng.choice(words) for _ in range(300)) for _ in range(12)]
    near = docs[0].split()
    near[10] = "changed"
    for f in range(4):  # copies and near copies across files, so the dedup must see the files in order
        chosen = docs[3 * f: 3 * f + 3] + ([docs[0]] if f == 2 else []) + ([" ".join(near)] if f == 3 else [])
        (root / "text" / f"part-{f}.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in chosen))
    return root


@pytest.fixture(scope="module")
def cluster():
    from trainplan.measure import distributed as dist

    c = dist.local_cluster(2)
    yield c
    c.close()


def test_local_workers_start_without_dask_malloc_trim_threshold(cluster):
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ in a worker's environment by default, which makes every
    # av.open map and unmap FFmpeg's buffers (1.4-1.9x slower here); the full pass's workers go without it
    import os

    from dask.distributed import Client

    assert "MALLOC_TRIM_THRESHOLD_" in __import__("dask").config.get("distributed.nanny.pre-spawn-environ")
    with Client(cluster) as client:
        seen = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_", "unset"))
    assert len(seen) == 2
    assert set(seen.values()) == {"unset"} or set(seen.values()) == {os.environ.get("MALLOC_TRIM_THRESHOLD_")}


def _same(full: dict, one: dict) -> None:
    assert full["files"] == one["files"]
    assert full["aggregate"] == one["aggregate"]


def test_local_workers_run_without_dask_s_profiler(cluster):
    # Dask's default samples each worker's running task every 10 ms for its dashboard (4-5 % of the pass
    # here); a local cluster of the full pass starts its workers with it off
    import dask
    from dask.distributed import Client

    assert dask.config.get("distributed.worker.profile.enabled") is True  # the default, in this process
    with Client(cluster) as client:
        seen = client.run(lambda: __import__("dask").config.get("distributed.worker.profile.enabled"))
    assert set(seen.values()) == {False}


def test_full_pass_equals_the_one_machine_pass(corpus, cluster):
    from trainplan.measure import distributed as dist

    for sub in ("video", "text"):
        units = shards.units([corpus / sub])
        one = shards.inspect_units(units, where=sub)
        full = dist.full_pass(units, where=sub, scheduler=cluster.scheduler_address)
        _same(full, one)
        assert full["units_inspected_now"] == len(units)
    a = one["aggregate"]
    assert a["exact_duplicate_documents"] == 1 and a["near_duplicate_documents"] == 1  # found across files


def test_journal_resumes_without_redoing_a_finished_unit(corpus, cluster, tmp_path):
    from trainplan.measure import distributed as dist

    units = shards.units([corpus / "video"])
    journal = tmp_path / "journal.jsonl"
    first = dist.full_pass(units[:3], where="video", scheduler=cluster.scheduler_address, journal=journal, batch=2)
    assert first["units_inspected_now"] == 3
    with open(journal, "a") as f:
        f.write('{"unit": "cut short by a cr')  # a crash mid-line: that unit is done again
    again = dist.full_pass(units, where="video", scheduler=cluster.scheduler_address, journal=journal)
    assert again["units_inspected_now"] == len(units) - 3
    _same(again, shards.inspect_units(units, where="video"))
    done = dist.full_pass(units, where="video", scheduler="tcp://127.0.0.1:1", journal=journal)
    assert done["units_inspected_now"] == 0  # nothing left: no scheduler is even reached


def test_a_killed_worker_loses_nothing(corpus, cluster):
    from trainplan.measure import distributed as dist

    units = shards.units([corpus / "video"])
    killed = []

    def progress(total, path):
        if path is not None and not killed:
            workers = [w for w in cluster.workers.values() if getattr(w, "process", None) is not None]
            pid = workers[0].process.pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    full = dist.full_pass(units, where="video", scheduler=cluster.scheduler_address, progress=progress)
    assert killed and full["units_inspected_now"] == len(units)
    _same(full, shards.inspect_units(units, where="video"))


def test_cli_full_and_bad_scheduler(corpus, cli, cluster):
    res = cli("data", "inspect", str(corpus / "video"), "--full", "--scheduler", cluster.scheduler_address,
              "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["files_inspected"] == 8
    bad = cli("data", "inspect", str(corpus / "video"), "--full", "--scheduler", "local:0")
    assert bad.returncode == 2 and "--scheduler" in bad.stderr
    both = cli("data", "inspect", str(corpus / "video"), "--scheduler", "tcp://127.0.0.1:1")
    assert both.returncode == 2 and "--full" in both.stderr


def test_a_bad_unit_on_a_worker_is_one_line(tmp_path, cli, cluster):
    (tmp_path / "broken.mp4").write_bytes(b"not a video at all")
    res = cli("data", "inspect", str(tmp_path), "--full", "--scheduler", cluster.scheduler_address)
    assert res.returncode == 2 and "broken.mp4" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_full_pass_on_s3_with_a_local_cluster_it_starts(corpus):
    """`--scheduler local:2` on shards in moto's S3 server: the workers read the members where they live
    (their environment names the server and the test credentials, as a real cluster's would a store's)."""
    from s3_server import s3_server

    from trainplan.measure import distributed as dist

    with s3_server():
        import fsspec

        fs = fsspec.filesystem("s3")
        fs.mkdir("dask-bucket")
        fs.put(str(corpus / "video"), "dask-bucket/video", recursive=True)
        units = shards.units(["s3://dask-bucket/video"])
        full = dist.full_pass(units, where="s3", scheduler="local:2", batch=3)
        _same(full, shards.inspect_units(units, where="s3"))
    assert full["files_found"] == 8 and full["files"][0]["path"].startswith("s3://dask-bucket/video/")


def test_the_automatic_batch():
    """--batch not given: 16 tasks a worker where the units allow, at most 250 units a task, at least 1."""
    from trainplan.measure.distributed import auto_batch

    assert auto_batch(10_000, 2) == 250  # 10,000 // 32 = 312, capped
    assert auto_batch(5_000, 2) == 156  # 5,000 // 32
    assert auto_batch(1_000, 2) == 31  # 1,000 // 32
    assert auto_batch(100, 2) == 3
    assert auto_batch(10, 2) == 1 and auto_batch(0, 2) == 1
    assert auto_batch(10_000, 0) == 250  # a scheduler with no worker yet counts as one


def test_full_pass_skips_a_bad_file_as_the_one_machine_pass(cluster, tmp_path):
    """3 good clips and an empty z.mp4: the full pass names z.mp4 once, skips it, and inspects the 3 (as the
    plain pass does), 3 x 30 frames."""
    from trainplan.measure import distributed as dist

    for i in range(3):
        clip = probe.synthesize_clip(probe.ClipFormat(64, 64, 25.0, 100e3, 10), 30, seed=i)
        (tmp_path / f"g{i}.mp4").write_bytes(clip.data)
    (tmp_path / "z.mp4").write_bytes(b"")
    named = []
    full = dist.full_pass(shards.units([tmp_path]), where="t", scheduler=cluster.scheduler_address,
                          on_skip=lambda p, why: named.append(p.name))
    assert named == ["z.mp4"] and full["files_skipped"] == 1 and len(full["files"]) == 3
    assert full["aggregate"]["frames"] == 3 * 30
