"""numba kernel of the queue engine (imported only through trainplan.simulate.fast).

Line for line the recurrence of trainplan.simulate.queue._recurrence, run over the frames
one chunk at a time with O(1) state per frame: see fast.py for why the results are
bit-identical, how the statistics are fused into the loop and what is kept.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF = np.inf

# Columns of the float record of a frame (fast.REC_*): read start, read done, queued (entered the
# read-ahead queue), decode start, decode done, entered the buffer, step start.
RS, RD, QD, DS, DC, EN, ST = range(7)
# Columns of the integer record: frame index, decoder, rank.
FR, WHO, RANK = range(3)
# Slots of the integer state.
J, K, SIZE, NREC, NX = range(5)
# Slots of the float state.
P_PREV, A_NEXT, T0, T1 = range(4)


@njit(cache=True, nogil=True, inline="always")
def _before(t1: float, i1: int, t2: float, i2: int) -> bool:
    # (t1, i1) < (t2, i2) as Python compares tuples; frame indices are unique
    return t1 < t2 or (t1 == t2 and i1 < i2)


@njit(cache=True, nogil=True)
def _sift_down(ht: np.ndarray, hi: np.ndarray, hd: np.ndarray, size: int) -> None:
    pos = 0
    t = ht[0]
    i = hi[0]
    d = hd[0]
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _before(ht[right], hi[right], ht[child], hi[child]):
            child = right
        if _before(ht[child], hi[child], t, i):
            ht[pos] = ht[child]
            hi[pos] = hi[child]
            hd[pos] = hd[child]
            pos = child
        else:
            break
    ht[pos] = t
    hi[pos] = i
    hd[pos] = d


@njit(cache=True, nogil=True)
def _push(ht: np.ndarray, hi: np.ndarray, hd: np.ndarray, size: int, t: float, i: int, d: int) -> None:
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if _before(t, i, ht[parent], hi[parent]):
            ht[pos] = ht[parent]
            hi[pos] = hi[parent]
            hd[pos] = hd[parent]
            pos = parent
        else:
            break
    ht[pos] = t
    hi[pos] = i
    hd[pos] = d


@njit(cache=True, nogil=True, inline="always")
def _overlap(start: float, end: float, t0: float, t1: float) -> float:
    # np.clip(end, t0, t1) - np.clip(start, t0, t1), as the reference computes it
    e = end if end > t0 else t0
    if e > t1:
        e = t1
    s = start if start > t0 else t0
    if s > t1:
        s = t1
    return e - s


# The pieces of queue_chunk below take the kernel's arrays. Compiled without numba's reference counting
# (_nrt=False: nothing here allocates), a call costs what the inline code did; with it, every array handed
# to a piece is counted in and out once per frame, and the pass runs two to nine times slower.


@njit(cache=True, nogil=True, _nrt=False)
def _record_decoding(size, ht, hi, hd, slot_f, slot_rec, rec_f, rec_i, nrec, nrec_max):
    """The count of recorded frames after recording each frame still decoding (the heap's), while rows remain."""
    for h in range(size):
        dh = hd[h]
        if nrec < nrec_max:
            rec_f[nrec, RS] = slot_f[dh, 2]
            rec_f[nrec, RD] = slot_f[dh, 3]
            rec_f[nrec, QD] = slot_f[dh, 0]
            rec_f[nrec, DS] = slot_f[dh, 1]
            rec_f[nrec, DC] = ht[h]
            rec_i[nrec, FR] = hi[h]
            rec_i[nrec, WHO] = dh
            slot_rec[dh] = nrec
            nrec += 1
    return nrec


@njit(cache=True, nogil=True, _nrt=False)
def _enter_buffer(ci, k, ka, B, a_ring, a_next, r, rec_f, rec_i):
    """(entered the buffer, step start) of the frame of rank k done decoding at ci, its record r filled in."""
    ab = a_ring[ka] if k >= B else -INF  # A[k - B]
    e = ci if ci >= ab else ab
    a = e if e >= a_next else a_next
    a_ring[ka] = a
    if r >= 0:
        rec_f[r, EN] = e
        rec_f[r, ST] = a
        rec_i[r, RANK] = k
    return e, a


@njit(cache=True, nogil=True, _nrt=False)
def _frame_statistics(k, k0, k1, ci, e, a, d, t0, t1, no_decoder, slot_f, group, dec, sums, gbusy, gblocked):
    """The window (t0, t1) after summing the time in each state of the frame at rank k >= k0 into the sums."""
    if k == k0:
        t0 = a
        sums[9] = a  # T0
    if k == k1:
        t1 = a
        sums[10] = a  # T1
    qd = slot_f[d, 0]
    si = slot_f[d, 1]
    if no_decoder:  # the reader is the one "decoder": read = decode interval, blocked = C..E
        rs = si
        rd = ci
        qd = e
        ds = e
        dc = e
    else:
        rs = slot_f[d, 2]
        rd = slot_f[d, 3]
        ds = si
        dc = ci
    sums[0] += _overlap(rs, rd, t0, t1)  # READ_BUSY
    sums[1] += _overlap(rd, qd, t0, t1)  # READ_BLOCKED
    sums[2] += _overlap(qd, ds, t0, t1)  # READ_QUEUE
    sums[3] += _overlap(e, a, t0, t1)  # BUFFER
    if not no_decoder:
        g = group[d]
        gbusy[g] += _overlap(ds, dc, t0, t1)
        gblocked[g] += _overlap(dc, e, t0, t1)
    if k < k1:  # measured frames
        sums[4] += ds - qd  # READ_QUEUE_WAIT
        sums[5] += e - dc  # DECODER_BLOCKED_WAIT
        sums[6] += a - e  # BUFFER_WAIT
        sums[7] += rd - rs  # READ_SECONDS
        if not no_decoder:
            sums[8] += (dc - ds) / dec[d]  # WORK
    return t0, t1


@njit(cache=True, nogil=True, _nrt=False)
def _queued(rj, j, q, js, s_ring, p_prev, no_decoder, bounded):
    """(queued, read done, the running read completion) of frame j, read in rj seconds after the frame before."""
    if no_decoder:
        p = 0.0  # nothing waits to be read: the reader is the decoder
        rd = 0.0
    elif bounded:
        rd = p_prev + rj  # read done: the previous frame entered the queue, this one was read
        p = rd
        if j >= q:
            sq = s_ring[js]  # decode start of frame j - q: its read-ahead slot frees then
            if sq > p:
                p = sq
        p_prev = p
    else:
        p_prev = p_prev + rj  # the cumulative reads, as np.cumsum adds them
        p = p_prev
        rd = p
    return p, rd, p_prev


@njit(cache=True, nogil=True, _nrt=False)
def _record_handed(j, d, rj, rd, p, st, cj, recording, reads_ahead, t0, slot_rec, rec_f, rec_i, nrec, nrec_max,
                   extra_f, extra_i, nx, nx_max):
    """(recorded frames, extra reads) after recording frame j handed to decoder d, or its read far ahead."""
    if recording and nrec < nrec_max:
        rec_f[nrec, RS] = rd - rj
        rec_f[nrec, RD] = rd
        rec_f[nrec, QD] = p
        rec_f[nrec, DS] = st
        rec_f[nrec, DC] = cj
        rec_i[nrec, FR] = j
        rec_i[nrec, WHO] = d
        slot_rec[d] = nrec
        nrec += 1
    else:
        slot_rec[d] = -1
        if recording and reads_ahead and nx < nx_max and rd > t0 and rd > rd - rj:
            extra_f[nx, 0] = rd - rj
            extra_f[nx, 1] = rd
            extra_i[nx] = j
            nx += 1
    return nrec, nx


@njit(cache=True, nogil=True, _nrt=False)
def _replace_first(ht: np.ndarray, hi: np.ndarray, hd: np.ndarray, size: int, t: float, i: int, d: int) -> None:
    """Nothing: the heap's first entry replaced by (t, i, d) and sifted to its place."""
    ht[0] = t
    hi[0] = i
    hd[0] = d
    _sift_down(ht, hi, hd, size)


@njit(cache=True, nogil=True, _nrt=False)
def _pop_first(ht: np.ndarray, hi: np.ndarray, hd: np.ndarray, size: int) -> int:
    """The heap's size after its first entry is removed (the last moved there and sifted down)."""
    size -= 1
    if size > 0:
        _replace_first(ht, hi, hd, size, ht[size], hi[size], hd[size])
    return size


@njit(cache=True, nogil=True, _nrt=False)
def queue_chunk(read, work, lo, n, dec, group, step, B, q, no_decoder, k0, k1, rec_from,
                fstate, istate, ht, hi, hd, slot_f, slot_rec, a_ring, s_ring, rec_f, rec_i, extra_f, extra_i,
                sums, gbusy, gblocked):
    """Advance the recurrence over the frames lo .. lo + len(read) - 1 (per-frame read seconds and decode
    work multipliers); the last chunk (ending at frame n) also drains the decoders.

    `q` < 0: unbounded read-ahead (the reads are a running sum). `no_decoder`: pre-decoded frames, the
    reader is the one "decoder" (`work` is then the read seconds and the read-ahead queue is empty).
    State between chunks lives in fstate/istate, the heap (ht, hi, hd: finish time, frame, decoder),
    each decoder's frame (slot_f: queued, decode start, read start, read done; slot_rec: its record),
    and two rings: the last B step starts and the last q decode starts. Statistics over ranks
    k0 .. k1-1 are summed into `sums`/`gbusy`/`gblocked`. Frames still decoding at rank `rec_from`
    and every frame handed out from then on are recorded (rec_f, rec_i) while rows remain;
    with unbounded read-ahead, the reads of frames beyond the records that end after t0 go to
    `extra` while its rows remain (the timeline's reads far ahead of the decoders)."""
    hi_frame = lo + read.shape[0]
    c = min(dec.shape[0], n)
    bounded = q >= 0
    nrec_max = rec_f.shape[0]
    nx_max = extra_f.shape[0]
    j, k, size, nrec, nx = istate[J], istate[K], istate[SIZE], istate[NREC], istate[NX]
    p_prev, a_next, t0, t1 = fstate[P_PREV], fstate[A_NEXT], fstate[T0], fstate[T1]
    e = -INF
    d = 0
    ka = k % B  # k mod B and j mod q, advanced by wrapping (no division per frame)
    js = j % q if bounded else 0
    while True:
        if j < n and j >= hi_frame:
            break  # the next frame to hand out is in the next chunk
        handing = j < c  # the first c frames go to the c idle decoders, no frame leaves
        if not handing:
            if size == 0:
                break
            if k == rec_from and nrec_max > 0:  # record every frame still decoding
                nrec = _record_decoding(size, ht, hi, hd, slot_f, slot_rec, rec_f, rec_i, nrec, nrec_max)
            # ---- the frame finishing first enters the buffer: rank k
            ci = ht[0]
            d = hd[0]
            e, a = _enter_buffer(ci, k, ka, B, a_ring, a_next, slot_rec[d], rec_f, rec_i)
            a_next = a + step
            if k >= k0:  # ---- statistics of the frame (rank k), fused into the pass
                t0, t1 = _frame_statistics(k, k0, k1, ci, e, a, d, t0, t1, no_decoder, slot_f, group, dec, sums,
                                           gbusy, gblocked)
            k += 1
            ka += 1
            if ka == B:
                ka = 0
            if j >= n:  # drain: no frame left to hand out
                size = _pop_first(ht, hi, hd, size)
                continue
        else:
            d = j
            e = -INF
        # ---- hand frame j to decoder d, free since e
        x = j - lo
        rj = read[x]
        p, rd, p_prev = _queued(rj, j, q, js, s_ring, p_prev, no_decoder, bounded)
        st = p if p >= e else e
        if bounded and not no_decoder:
            s_ring[js] = st
        cj = st + work[x] * dec[d]
        slot_f[d, 0] = p
        slot_f[d, 1] = st
        slot_f[d, 2] = rd - rj
        slot_f[d, 3] = rd
        nrec, nx = _record_handed(j, d, rj, rd, p, st, cj, k >= rec_from and not handing,
                                  not bounded and not no_decoder, t0, slot_rec, rec_f, rec_i, nrec, nrec_max,
                                  extra_f, extra_i, nx, nx_max)
        if handing:
            _push(ht, hi, hd, size, cj, j, d)
            size += 1
        else:
            _replace_first(ht, hi, hd, size, cj, j, d)
        j += 1
        if bounded:
            js += 1
            if js == q:
                js = 0
    istate[J], istate[K], istate[SIZE], istate[NREC], istate[NX] = j, k, size, nrec, nx
    fstate[P_PREV], fstate[A_NEXT], fstate[T0], fstate[T1] = p_prev, a_next, t0, t1
