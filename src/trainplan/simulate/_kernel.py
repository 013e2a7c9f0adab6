"""numba kernel of the queue engine (imported only through trainplan.simulate.fast).

Line for line the recurrence of trainplan.simulate.queue._recurrence; see fast.py for
why the results are bit-identical and how the statistics are fused into the loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF = np.inf


@njit(cache=True, nogil=True, inline="always")
def _before(t1: float, i1: int, t2: float, i2: int) -> bool:
    # (t1, i1) < (t2, i2) as Python compares tuples; frame indices are unique
    return t1 < t2 or (t1 == t2 and i1 < i2)


@njit(cache=True, nogil=True)
def _sift_down(ht: np.ndarray, hi: np.ndarray, size: int) -> None:
    pos = 0
    t = ht[0]
    i = hi[0]
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
            pos = child
        else:
            break
    ht[pos] = t
    hi[pos] = i


@njit(cache=True, nogil=True)
def _push(ht: np.ndarray, hi: np.ndarray, size: int, t: float, i: int) -> None:
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if _before(t, i, ht[parent], hi[parent]):
            ht[pos] = ht[parent]
            hi[pos] = hi[parent]
            pos = parent
        else:
            break
    ht[pos] = t
    hi[pos] = i


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


@njit(cache=True, nogil=True)
def queue_kernel(r, read, work, dec, group, step, B, q, no_decoder, k0, k1, fused,
                 P, S, C, E, A, A_frame, order, who, sums, gbusy, gblocked):
    """The recurrence; `q` < 0 means unbounded read-ahead (then P is `r`, the cumulative reads).

    S and A carry max(q, 0) and B leading -inf entries, as in the reference."""
    n = work.shape[0]
    c = min(dec.shape[0], n)
    bounded = q >= 0
    qq = q if bounded else 0
    for k in range(B):
        A[k] = -INF
    for k in range(qq):
        S[k] = -INF
    ht = np.empty(max(c, 1))
    hi = np.empty(max(c, 1), np.int64)
    size = 0
    p_prev = 0.0
    for j in range(c):
        if bounded:
            p = p_prev + r[j]
            if S[j] > p:
                p = S[j]
            P[j] = p
            p_prev = p
        S[j + qq] = P[j]
        who[j] = j
        cj = P[j] + work[j] * dec[j]
        C[j] = cj
        _push(ht, hi, size, cj, j)
        size += 1
    a_next = -INF
    j = c
    t0 = 0.0
    t1 = INF
    for k in range(n):
        ci = ht[0]
        i = hi[0]
        ab = A[k]
        e = ci if ci >= ab else ab
        a = e if e >= a_next else a_next
        A[k + B] = a
        a_next = a + step
        E[i] = e
        A_frame[i] = a
        order[k] = i
        if j < n:
            if bounded:
                p = p_prev + r[j]
                sq = S[j]  # decode start of frame j - q: its read-ahead slot frees then
                if sq > p:
                    p = sq
                P[j] = p
                p_prev = p
            else:
                p = P[j]
            st = p if p >= e else e
            S[j + qq] = st
            d = who[i]
            who[j] = d
            cj = st + work[j] * dec[d]
            C[j] = cj
            ht[0] = cj
            hi[0] = j
            _sift_down(ht, hi, size)
            j += 1
        else:  # drain: pop
            size -= 1
            if size > 0:
                ht[0] = ht[size]
                hi[0] = hi[size]
                _sift_down(ht, hi, size)
        if not fused or k < k0:
            continue
        # ---- statistics of frame i (rank k), fused into the pass
        if k == k0:
            t0 = a
            sums[10 - 1] = a  # T0
        if k == k1:
            t1 = a
            sums[10] = a  # T1
        si = S[i + qq]
        if no_decoder:  # the reader is the one "decoder": read = decode interval, blocked = C..E
            rs = si
            rd = C[i]
            qd = E[i]
            ds = e
            dc = e
        else:
            if bounded:
                rd = read[0] if i == 0 else P[i - 1] + read[i]
            else:
                rd = P[i]
            rs = rd - read[i]
            qd = P[i]
            ds = si
            dc = C[i]
        sums[0] += _overlap(rs, rd, t0, t1)  # READ_BUSY
        sums[1] += _overlap(rd, qd, t0, t1)  # READ_BLOCKED
        sums[2] += _overlap(qd, ds, t0, t1)  # READ_QUEUE
        sums[3] += _overlap(e, a, t0, t1)  # BUFFER
        if not no_decoder:
            g = group[who[i]]
            gbusy[g] += _overlap(ds, dc, t0, t1)
            gblocked[g] += _overlap(dc, e, t0, t1)
        if k < k1:  # measured frames
            sums[4] += ds - qd  # READ_QUEUE_WAIT
            sums[5] += e - dc  # DECODER_BLOCKED_WAIT
            sums[6] += a - e  # BUFFER_WAIT
            sums[7] += rd - rs  # READ_SECONDS
            if not no_decoder:
                sums[8] += (dc - ds) / dec[who[i]]  # WORK
