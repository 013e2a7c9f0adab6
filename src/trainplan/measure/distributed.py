"""The full pass on a Dask cluster: `data inspect URL --full --scheduler ADDRESS` (issue 26).

Each unit (a file or a shard member, `shards.units`) is one task: a worker reads it where it lives
and runs the per-file inspection of `inspect.py` on it (video: the demux pass; tokens: the
documents, their exact-copy digests and their MinHash signatures, the costly part of the
deduplication). The client gathers the results in the corpus's order and aggregates them with the
same functions as the one-machine pass: `inspect.aggregate_video`, and for tokens the same `Dedup`
fed the same documents in the same order with the workers' signatures, so the figures are the
one-machine pass's exactly (the LSH index, a few dictionary look-ups a document, stays on the
client, where the order is).

Resumable: with `journal`, each finished unit's result is appended to that file (one JSON line) as
it arrives; a rerun with the same journal reads it and submits only the units it lacks. A worker
that dies mid-task loses only its running task, which the Dask scheduler gives to another worker.
Memory per worker: one unit's bytes (a temporary copy) and its record, a task at a time per worker
thread (`threads_per_worker = 1` on a local cluster).

Dask rather than Ray (docs/data-where-it-lives.md): the work is a flat bag of independent,
read-bound tasks with small results; Dask's scheduler is a pip-installable pure-Python package,
runs a local cluster in-process for CI without a separate runtime, reschedules a lost worker's
tasks by itself, and its workers read fsspec locations as the rest of this code does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainplan.errors import UserError
from trainplan.measure import inspect as insp
from trainplan.measure import shards

JOURNAL_FORMAT = 1


@dataclass
class _Signatures(insp.Dedup):
    """On a worker: each document's counts, exact-copy digest and MinHash hash values, in order
    (the deduplication itself is the client's)."""

    signed: list[tuple[int, int, bytes, Any]] = field(default_factory=list)
    scheme: str | None = None  # datasketch's hashing scheme of the signatures (datasketch >= 2)
    dtype: str = "uint64"  # and the type of their hash values

    def __post_init__(self) -> None:
        if self.near:
            try:
                import datasketch  # noqa: F401
            except ImportError:
                self.near = False

    def add(self, doc: insp.Document, signature: Any = None) -> None:
        self.documents += 1
        self.tokens += doc.tokens
        self.bytes += doc.bytes
        values = None
        if self.near and doc.shingles:
            from datasketch import MinHash

            m = MinHash(num_perm=insp.MINHASH_PERMUTATIONS, seed=self.seed)
            m.update_batch(list(doc.shingles))
            values = m.hashvalues
            self.scheme = getattr(m, "scheme", None)
            self.dtype = str(values.dtype)
        self.signed.append((doc.tokens, doc.bytes, hashlib.blake2b(doc.key, digest_size=16).digest(), values))


def inspect_unit(unit: shards.Unit, kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """One task: the unit inspected on a worker, as a JSON-able result."""
    if kind == "video":
        return {"video": _video_dict(shards.inspect_video_unit(unit))}
    if kind == "image":
        return {"image": shards.inspect_image_unit(unit)}
    collector = _Signatures(near=options.get("near", True))
    with shards.staged(unit) as p:
        out = insp.inspect_tokens([p], dtype=options.get("dtype"), eos=options.get("eos"),
                                  tokenizer=options.get("tokenizer"), near=collector.near, dedup=collector)
    record = out["files"][0]
    signed = [[t, b, base64.b64encode(d).decode(), None if v is None else base64.b64encode(v.tobytes()).decode()]
              for t, b, d, v in collector.signed]
    return {"tokens": record, "counted": out["aggregate"]["tokens_counted_as"], "signed": signed,
            "scheme": collector.scheme, "dtype": collector.dtype}


def inspect_batch(batch: list[shards.Unit], kind: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """One task: a few units in turn. A unit refused (a file that is not what its name says) comes back
    as {"refused": [where, expected]} for the client to raise (a UserError does not cross processes)."""
    out = []
    for u in batch:
        try:
            out.append(inspect_unit(u, kind, options))
        except UserError as err:
            out.append({"refused": [err.where, err.expected]})
    return out


def _accepted(result: dict[str, Any]) -> dict[str, Any]:
    """A worker's result, or the UserError of a unit it refused (for inspect.read_each to skip, as on one
    machine)."""
    if "refused" in result:
        raise UserError(*result["refused"])
    return result


def _video_dict(v: insp.VideoFile) -> dict[str, Any]:
    return insp.record_fields(v)


#: Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in each worker's environment before spawning it (to hand
#: freed memory back to the OS). Setting glibc's trim threshold at all turns off its dynamic mmap threshold,
#: so FFmpeg's per-file buffers (avformat_open_input, the stream probe) are mapped and unmapped on every
#: file: av.open measured 1.4-1.9x slower in a worker than in one process here, which ate the second
#: worker's gain. A local cluster's workers start without it; a worker's memory is still one unit's.
WORKER_ENVIRONMENT_UNSET = ("MALLOC_TRIM_THRESHOLD_",)

#: Dask settings of a local cluster, whose scheduler, client and workers share this machine's cores with
#: the pass: no statistical profiler in the workers (it samples the running task's stack every 10 ms for the
#: dashboard's profile page; the full pass has its own progress bar: 4-5 % of the pass's wall time on the
#: 2-core machine here), no work stealing (the tasks are alike and queued on the scheduler, which hands
#: the next one to whichever worker is free; a lost worker's tasks are rescheduled without it), and the
#: system and memory monitors and the event loop's tick at a slower beat. Together they took the client and
#: scheduler's CPU during a 10,000-clip pass from 1.4-1.6 s to 0.85-1.1 s (benchmarks/bench_distributed.py).
WORKER_SETTINGS = {"distributed.worker.profile.enabled": False,
                   "distributed.scheduler.work-stealing": False,
                   "distributed.admin.system-monitor.interval": "2s",
                   "distributed.worker.memory.monitor-interval": "1s",
                   "distributed.admin.tick.interval": "200ms"}


def local_cluster(workers: int) -> Any:
    """A local Dask cluster of `workers` single-threaded worker processes for the full pass, started
    with the worker environment and settings above."""
    import dask
    from dask.distributed import LocalCluster

    unset = {f"distributed.nanny.pre-spawn-environ.{k}": None for k in WORKER_ENVIRONMENT_UNSET}
    with dask.config.set({**unset, **WORKER_SETTINGS}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")


def _client(scheduler: str | None) -> tuple[Any, Any]:
    """(client, cluster to close or None): `tcp://HOST:PORT` an existing scheduler, `local:N` a local
    cluster of N single-threaded worker processes."""
    if not scheduler:
        raise UserError("--scheduler", "expected the Dask scheduler of --full: tcp://HOST:PORT or local:N")
    try:
        from dask.distributed import Client
    except ImportError:
        raise UserError("--full", "the distributed pass needs Dask (pip install 'trainplan[distributed]')") from None
    if scheduler.startswith("local:"):
        try:
            n = int(scheduler.split(":", 1)[1])
        except ValueError:
            n = 0
        if n < 1:
            raise UserError("--scheduler", f"expected local:N with N >= 1 workers, got {scheduler!r}")
        cluster = local_cluster(n)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError, ValueError) as err:
        raise UserError("--scheduler", f"expected a reachable Dask scheduler at {scheduler} ({err})") from None


def _read_journal(path: Path, kind: str, options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                if lineno > 1:
                    continue  # a last line cut short by a crash: that unit is done again
                raise UserError(str(path), "expected a journal written by `data inspect --full`") from None
            if lineno == 1:
                if obj.get("journal") != JOURNAL_FORMAT or obj.get("kind") != kind or obj.get("options") != options:
                    raise UserError(str(path), "expected the journal of the same corpus kind and options "
                                               f"(kind {kind}, {options}); use a new --journal file")
                continue
            done[obj["unit"]] = obj["result"]
    return done


#: The automatic batch: at least this many tasks a worker (the last ones balance the load), at most this
#: many units a task. Each task costs the scheduler and client about 2.3 ms of CPU on the workers' own
#: cores (3,000 small clips on a 2-worker local cluster took 17.2 s at one a task, 2.6 s at 93 a task, 3.7 s
#: in one process; 10,000 clips: the client and scheduler spent 1.29, 0.61 and 0.44 s of CPU at 25, 100 and
#: 250 clips a task); 250 small clips are about 0.2 s of a worker's time, so the last task's tail is short.
TASKS_PER_WORKER = 16
MAX_AUTO_BATCH = 250


def auto_batch(units: int, workers: int) -> int:
    """Units a task when --batch is not given: as many as leaves TASKS_PER_WORKER tasks a worker, from 1 to
    MAX_AUTO_BATCH."""
    return max(1, min(MAX_AUTO_BATCH, units // (max(1, workers) * TASKS_PER_WORKER)))


def full_pass(found: list[shards.Unit], *, where: str, scheduler: str | None, journal: Path | None = None,
              progress: Callable[[int, Any], None] | None = None, dtype: str | None = None,
              eos: int | None = None, tokenizer: str | None = None, near: bool = True,
              batch: int | None = None, cameras: int | None = None,
              on_skip: Callable[[Path, str], None] | None = None) -> dict[str, Any]:
    """Every unit inspected on the cluster's workers; the one-machine pass's report, with
    `units_inspected_now` (the units this run inspected; the rest came from the journal).

    `batch` units go to a worker as one task (fewer round trips to the scheduler for many small
    units; a crashed worker then redoes its whole batch); None: `auto_batch` for the cluster's workers."""
    if batch is not None and batch < 1:
        raise UserError("--batch", f"expected at least 1 unit a task, got {batch}")
    found, repeated = shards.once(found)
    kind = shards.corpus_kind(found, where)
    pool = [u for u in found if u.kind in (kind, "refused")]
    options = {"dtype": dtype, "eos": eos, "tokenizer": tokenizer, "near": near}
    done = _read_journal(journal, kind, options) if journal is not None else {}
    todo = [u for u in pool if u.url not in done]
    if progress is not None:
        progress(len(pool), None)
        for _ in range(len(pool) - len(todo)):
            progress(len(pool), "(journal)")
    log = None
    if journal is not None:
        fresh = not journal.is_file() or journal.stat().st_size == 0
        cut = not fresh and not journal.read_bytes().endswith(b"\n")  # a crash mid-line: start a new one
        log = open(journal, "a", encoding="utf-8")  # noqa: SIM115 - closed below
        if cut:
            log.write("\n")
        if fresh:
            log.write(json.dumps({"journal": JOURNAL_FORMAT, "kind": kind, "options": options}) + "\n")
            log.flush()
    try:
        if todo:
            client, cluster = _client(scheduler)
            try:
                from dask.distributed import as_completed

                if batch is None:
                    batch = auto_batch(len(todo), len(client.scheduler_info().get("workers", {})))
                batches = [todo[i: i + batch] for i in range(0, len(todo), batch)]
                futures = {client.submit(inspect_batch, b, kind, options, key=f"inspect-{i}-{b[0].url}", pure=False): b
                           for i, b in enumerate(batches)}
                for future in as_completed(futures):
                    for u, result in zip(futures[future], future.result()):
                        done[u.url] = result  # a refused unit too: skipped below, and again on a rerun
                        if log is not None:
                            log.write(json.dumps({"unit": u.url, "result": result}) + "\n")
                        if progress is not None:
                            progress(len(pool), Path(u.url.split("#")[-1]))
                    if log is not None:
                        log.flush()
                        os.fsync(log.fileno())
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()
    finally:
        if log is not None:
            log.close()
    pairs, skipped = insp.read_each(pool, lambda u: (u, _accepted(done[u.url])), on_skip=on_skip)
    out, records = _aggregate(kind, [u for u, _ in pairs], [r for _, r in pairs], near)
    out.update(insp.skip_report(records, skipped))
    if kind == "video":
        out["aggregate"]["streams"], out["aggregate"]["streams_basis"] = shards.unit_streams(pool, cameras)
    out.update(location=where, units="shard members" if any(u.member is not None for u in pool) else "files",
               files_found=len(pool), files_inspected=len(pool), units_inspected_now=len(todo),
               named_more_than_once=repeated,
               scheduler=scheduler)
    return out


def _aggregate(kind: str, pool: list[shards.Unit], results: list[dict[str, Any]],
               near: bool) -> tuple[dict[str, Any], list[insp.VideoFile]]:
    """The one-machine pass's aggregation of the workers' results, in the corpus's order, and the video
    records it was made from (built once: the skip report reads them too; empty for other kinds)."""
    if kind == "video":
        records = [insp.VideoFile(**r["video"]) for r in results]
        return {"kind": "video", "files": [r.to_dict() for r in records],
                "aggregate": insp.aggregate_video(records)}, records
    if kind == "image":
        recs = [r["image"] for r in results]
        return {"kind": "image", "files": recs, "aggregate": shards.aggregate_images(recs)}, []
    import numpy as np

    dedup = insp.Dedup(near=near)
    per_file = []
    counted = "token ids"
    for u, r in zip(pool, results):
        before = (dedup.exact_documents + dedup.near_documents, dedup.exact_tokens + dedup.near_tokens)
        for tokens, nbytes, digest, values in r["signed"]:
            signature = None
            if values is not None and dedup.near:
                from datasketch import MinHash

                hv = np.frombuffer(base64.b64decode(values), dtype=np.dtype(r.get("dtype", "uint64")))
                scheme = {"scheme": r["scheme"]} if r.get("scheme") else {}
                signature = MinHash(num_perm=insp.MINHASH_PERMUTATIONS, seed=dedup.seed, hashvalues=hv, **scheme)
            dedup.add(insp.Document(tokens, nbytes, base64.b64decode(digest), set()), signature)
        rec = dict(r["tokens"], path=shards.locations.display(u.url), bytes=u.size,
                   duplicate_documents=dedup.exact_documents + dedup.near_documents - before[0],
                   duplicate_tokens=dedup.exact_tokens + dedup.near_tokens - before[1])
        rec["bytes_per_token"] = u.size / rec["tokens"] if rec["tokens"] else None
        per_file.append(rec)
        if r["counted"] != "token ids":
            counted = r["counted"]
    return {"kind": "tokens", "files": per_file,
            "aggregate": insp.token_aggregate(dedup, sum(u.size for u in pool), counted)}, []
