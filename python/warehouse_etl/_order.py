"""The epoch order and the batch plan of docs/format/reading.md ("Epoch order",
"Batches and ranks"), identical to the Go reader's ``warehouse.EpochOrder`` and
``warehouse.PlanBatches``.

The random stream is SplitMix64 seeded from (seed, epoch); Fisher-Yates draws
``below(i+1)`` by Lemire's multiply-and-reject. The draws are generated with numpy
uint64 arithmetic (which wraps like Go's), many at a time: the 64x64 -> 128-bit
product's high word is assembled from 32-bit halves. Lemire's rejection (probability
n / 2^64 per draw) is handled exactly: the vectorised chunk is cut at the first
rejected draw, which is redone with the scalar path, and generation resumes after it.
"""
import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_CHUNK = 1 << 16
SHUFFLES = ("none", "global", "shard")
REMAINDERS = ("drop", "pad")


def mix64(z):
    """SplitMix64's finaliser on a Python int."""
    z = ((z ^ (z >> 30)) * _M1) & MASK64
    z = ((z ^ (z >> 27)) * _M2) & MASK64
    return z ^ (z >> 31)


def _mix64_np(z):
    """mix64 on a uint64 array, in place where possible (numpy wraps on overflow)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
        return z ^ (z >> np.uint64(31))


class OrderStream:
    """The pseudo-random stream behind every shuffle (Go: orderStream)."""

    def __init__(self, seed, epoch):
        if epoch < 0:
            raise ValueError(f"epoch {epoch}: must be >= 0")
        self.state = (int(seed) & MASK64) ^ mix64((int(epoch) + GOLDEN) & MASK64)

    def next(self):
        """The next 64-bit value."""
        self.state = (self.state + GOLDEN) & MASK64
        return mix64(self.state)

    def below(self, n):
        """A uniform integer in [0, n), n >= 1, by Lemire's method (scalar path)."""
        m = self.next() * n
        if m & MASK64 < n:
            threshold = ((1 << 64) - n) % n
            while m & MASK64 < threshold:
                m = self.next() * n
        return m >> 64

    def _values(self, count):
        """The next ``count`` values of the stream as a uint64 array, without advancing."""
        k = np.arange(1, count + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            states = np.uint64(self.state) + k * np.uint64(GOLDEN)
        return _mix64_np(states)

    def draws_for_shuffle(self, length):
        """The Fisher-Yates draws of a shuffle of ``length`` elements:
        ``j[i] = below(i + 1)`` for i = length-1 down to 1, returned in that order."""
        if length < 2:
            return np.empty(0, dtype=np.int64)
        if length - 1 > 0xFFFFFFFF:  # the vectorised product needs n < 2^32
            return np.array([self.below(i + 1) for i in range(length - 1, 0, -1)], dtype=np.int64)
        out = np.empty(length - 1, dtype=np.int64)
        pos = 0  # draws done; the next bound is n = length - pos
        while pos < length - 1:
            count = min(_CHUNK, length - 1 - pos)
            x = self._values(count)
            n = np.arange(length - pos, length - pos - count, -1, dtype=np.uint64)
            with np.errstate(over="ignore"):
                lo = x * n
                xl = x & np.uint64(0xFFFFFFFF)
                xh = x >> np.uint64(32)
                hi = (xh * n + ((xl * n) >> np.uint64(32))) >> np.uint64(32)
                small = lo < n
                reject = np.zeros(count, dtype=bool)
                if small.any():
                    nn = n[small]
                    threshold = (np.uint64(0) - nn) % nn
                    reject[small] = lo[small] < threshold
            bad = np.flatnonzero(reject)
            take = int(bad[0]) if bad.size else count
            out[pos:pos + take] = hi[:take].astype(np.int64)
            self.state = (self.state + take * GOLDEN) & MASK64
            pos += take
            if take < count:  # a rejected draw: redo it exactly with the scalar path
                out[pos] = self.below(length - pos)
                pos += 1
        return out

    def shuffle(self, a):
        """Fisher-Yates on the numpy array ``a`` in place, from the last element down."""
        draws = self.draws_for_shuffle(len(a)).tolist()
        items = a.tolist()
        i = len(items) - 1
        for j in draws:
            items[i], items[j] = items[j], items[i]
            i -= 1
        a[:] = items


def epoch_order(n, shard_starts, shuffle, seed, epoch):
    """The order in which one epoch visits samples 0..n-1 (Go: warehouse.EpochOrder), as
    an int64 array. ``shard_starts`` is the first sample of each shard."""
    if shuffle not in SHUFFLES:
        raise ValueError(f"shuffle {shuffle!r}: want none, global or shard")
    order = np.arange(n, dtype=np.int64)
    s = OrderStream(seed, epoch)
    if shuffle == "global":
        s.shuffle(order)
    elif shuffle == "shard":
        shards = np.arange(len(shard_starts), dtype=np.int64)
        s.shuffle(shards)
        blocks = []
        for k in shards.tolist():
            end = shard_starts[k + 1] if k + 1 < len(shard_starts) else n
            block = order[shard_starts[k]:end].copy()
            s.shuffle(block)
            blocks.append(block)
        order = np.concatenate(blocks) if blocks else order
    return order


def batches_per_rank(n, batch_size, world, remainder, start=0):
    """How many batches each rank gets of an epoch of ``n`` positions from ``start`` on
    (Go: warehouse.BatchesPerRank): floor((n-start)/(world*batch_size)) with drop,
    ceil with pad, 0 once ``start >= n``."""
    per = batch_size * max(world, 1)
    rest = max(0, n - start)
    return rest // per if remainder == "drop" else -(-rest // per)


def _check(batch_size, rank, world, remainder, start, epoch=0, shuffle="global"):
    if batch_size < 1:
        raise ValueError(f"batch size {batch_size}: must be >= 1")
    if world < 1 or rank < 0 or rank >= world:
        raise ValueError(f"rank {rank} of world size {world}: want 0 <= rank < world size")
    if epoch < 0:
        raise ValueError(f"epoch {epoch}: must be >= 0")
    if start < 0:
        raise ValueError(f"start position {start}: must be >= 0")
    if shuffle not in SHUFFLES:
        raise ValueError(f"shuffle {shuffle!r}: want none, global or shard")
    if remainder not in REMAINDERS:
        raise ValueError(f"remainder {remainder!r}: want drop or pad")


def plan_order(order, batch_size, *, rank=0, world=1, remainder="drop", start=0):
    """Cut an epoch's ``order`` into rank ``rank``'s batches from global position ``start``
    on (Go: warehouse.PlanOrder; reading.md, "Resuming"): global batch u holds positions
    [start+u*B, start+(u+1)*B) and goes to rank u mod world; position p >= N reads
    order[p mod N]. Returns ``(indices [T, B], repeats [T])`` as :func:`plan_batches`."""
    if world == 0:
        world = 1
    _check(batch_size, rank, world, remainder, start)
    n = len(order)
    if n == 0:
        raise ValueError("the warehouse has no samples")
    count = batches_per_rank(n, batch_size, world, remainder, start)
    if count == 0 and start == 0:
        raise ValueError(f"{n} samples cannot fill one batch of {batch_size} on each of {world} ranks; "
                         "use a smaller batch or pad the remainder")
    starts = start + (np.arange(count, dtype=np.int64) * world + rank) * batch_size
    positions = starts[:, None] + np.arange(batch_size, dtype=np.int64)[None, :]
    indices = np.asarray(order, dtype=np.int64)[positions % n]
    repeats = np.maximum(0, starts + batch_size - np.maximum(starts, n))
    return indices, repeats


def plan_batches(n, shard_starts, batch_size, *, seed=0, epoch=0, rank=0, world=1, shuffle="global",
                 remainder="drop", start=0):
    """Rank ``rank``'s batches of one epoch (Go: warehouse.PlanBatches): an int64 array
    ``[T, batch_size]`` of global sample indices and an int64 array ``[T]`` of repeats
    (how many of each batch's last rows are wrap-around padding, ``pad`` only), from
    global position ``start`` of the epoch's order on (0: the whole epoch; a resumed
    job's position, any world size: reading.md, "Resuming")."""
    if world == 0:
        world = 1
    _check(batch_size, rank, world, remainder, start, epoch, shuffle)
    if n == 0:
        raise ValueError("the warehouse has no samples")
    if batches_per_rank(n, batch_size, world, remainder, start) == 0 and start == 0:
        plan_order(np.arange(n), batch_size, rank=rank, world=world, remainder=remainder)  # raises
    order = epoch_order(n, shard_starts, shuffle, seed, epoch)
    return plan_order(order, batch_size, rank=rank, world=world, remainder=remainder, start=start)
