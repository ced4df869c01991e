"""A loader's resumable state (docs/format/reading.md, "Resuming"): small, the same on
every rank, and enough to continue an epoch exactly where a job stopped, with the same
or another world size, in O(1).

    {"format": "warehouse-etl/loader-state/1",
     "versions": ["<version id>", ...],     # the warehouse version(s) read, in mixture order
     "weights": null | [w, ...],            # a mixture's weights, else null
     "epoch_samples": N,                    # the epoch's length in samples (positions)
     "shuffle": "global", "remainder": "drop",
     "seed": 0, "epoch": 3,
     "position": 1536,                      # positions of the epoch order consumed, all ranks together
     "world": 8, "batch_size": 32}          # at save: informative, a resume may change both

``position`` after k batches per rank of W ranks from a start P is P + k*W*B: the first
``position`` positions of the epoch's order were handed out, whatever the world size.
A resume re-cuts the rest from ``position`` into batches of the new B for the new W.
"""
from .errors import WarehouseError

FORMAT = "warehouse-etl/loader-state/1"
_KEYS = ("format", "versions", "weights", "epoch_samples", "shuffle", "remainder", "seed", "epoch", "position",
         "world", "batch_size")


class LoaderStateError(WarehouseError):
    """A loader state that this loader cannot resume: another warehouse version,
    mixture, order or a malformed state."""


def make_state(*, versions, weights, epoch_samples, shuffle, remainder, seed, epoch, position, world, batch_size):
    """The state dict (only ints, strings, lists and None: torch.save and json both take it)."""
    return {"format": FORMAT, "versions": list(versions), "weights": None if weights is None else list(weights),
            "epoch_samples": int(epoch_samples), "shuffle": shuffle, "remainder": remainder, "seed": int(seed),
            "epoch": int(epoch), "position": int(position), "world": int(world), "batch_size": int(batch_size)}


def check_state(sd, *, versions, weights, epoch_samples, shuffle, remainder):
    """``(seed, epoch, position)`` of ``sd`` when this loader (reading ``versions`` with
    ``weights``, ``epoch_samples``, ``shuffle``, ``remainder``) can resume it, else
    :class:`LoaderStateError` saying what differs."""
    if not isinstance(sd, dict) or sd.get("format") != FORMAT:
        got = sd.get("format") if isinstance(sd, dict) else type(sd).__name__
        raise LoaderStateError(f"loader state: format {got!r}, want {FORMAT!r}")
    missing = [k for k in _KEYS if k not in sd]
    if missing:
        raise LoaderStateError(f"loader state: missing {', '.join(missing)}")
    if list(sd["versions"]) != list(versions):
        raise LoaderStateError(
            f"loader state: saved reading warehouse version(s) {', '.join(v[:16] for v in sd['versions'])}, "
            f"this loader reads {', '.join(v[:16] for v in versions)}: the same positions would be other samples; "
            "resume on the version the state was saved with (its directory is named by the version id)")
    want_w = None if weights is None else [float(w) for w in weights]
    got_w = None if sd["weights"] is None else [float(w) for w in sd["weights"]]
    if got_w != want_w:
        raise LoaderStateError(f"loader state: mixture weights {got_w}, this loader {want_w}")
    for key, want in (("epoch_samples", int(epoch_samples)), ("shuffle", shuffle), ("remainder", remainder)):
        if sd[key] != want:
            raise LoaderStateError(f"loader state: {key} {sd[key]!r}, this loader {want!r}: the order or the "
                                   "epoch's length would differ")
    for key in ("seed", "epoch", "position", "world", "batch_size"):
        if not isinstance(sd[key], int) or isinstance(sd[key], bool) or sd[key] < 0:
            raise LoaderStateError(f"loader state: {key} {sd[key]!r}, want an integer >= 0")
    return sd["seed"], sd["epoch"], sd["position"]


class StatefulLoader:
    """What makes :class:`warehouse_etl.torch.WarehouseLoader` resumable, torchdata's
    ``StatefulDataLoader`` protocol: :meth:`state_dict` after k batches of an epoch
    says the first ``start + k*world*batch_size`` positions of its order are consumed;
    :meth:`load_state_dict` makes the next ``iter(loader)`` continue there (any world
    size, any batch size), in O(1): the plan is cut from the position, nothing is read
    or replayed. Batches are counted as the loader hands them out, so batches read ahead
    (reader threads, worker processes, pinning) are not counted until delivered.

    The sampler is ``self.sampler`` (a WarehouseBatchSampler) and the data
    ``self.dataset.wh`` (a Warehouse or a Mixture)."""

    def _identity(self):
        wh = self.dataset.wh
        if hasattr(wh, "versions"):
            return wh.versions, wh.weights
        return [wh.manifest["version"]], None

    def _begin_epoch(self):
        """At ``iter(loader)``: the start of this iteration (a loaded state's position
        once, else 0), set on the sampler before anything plans."""
        s = self.sampler
        pending = getattr(self, "_resume", None)
        start = pending[1] if pending is not None and pending[0] == s.epoch else 0
        self._resume = None
        s.start = start
        self._progress = [s.epoch, start, 0]  # epoch, start position, batches handed out

    def _counted(self, inner):
        progress = self._progress
        for batch in inner:
            progress[2] += 1
            yield batch

    def set_epoch(self, epoch):
        """Use the order of ``epoch`` from the next ``iter(loader)`` on (a loaded state of
        another epoch is dropped: the new epoch starts at position 0)."""
        self.sampler.set_epoch(epoch)
        pending = getattr(self, "_resume", None)
        if pending is not None and pending[0] != self.sampler.epoch:
            self._resume = None
            self.sampler.start = 0

    @property
    def epoch(self):
        """The epoch of the next (or current) iteration: after :meth:`load_state_dict`
        the saved one, so a loop resumes as ``for epoch in range(loader.epoch, E)``."""
        return self.sampler.epoch

    def state_dict(self):
        """The loader's state (``_state`` module docstring): small, plain, the same on
        every rank."""
        s = self.sampler
        progress = getattr(self, "_progress", None)
        pending = getattr(self, "_resume", None)
        if progress is not None and progress[0] == s.epoch and pending is None:
            position = progress[1] + progress[2] * s.world * s.batch_size
        elif pending is not None and pending[0] == s.epoch:
            position = pending[1]
        else:
            position = 0
        versions, weights = self._identity()
        return make_state(versions=versions, weights=weights, epoch_samples=s.epoch_samples, shuffle=s.shuffle,
                          remainder=s.remainder, seed=s.seed, epoch=s.epoch, position=position, world=s.world,
                          batch_size=s.batch_size)

    def load_state_dict(self, sd):
        """Continue from ``sd`` at the next ``iter(loader)``: its seed, epoch and position
        (refused with :class:`LoaderStateError` when it was saved reading another
        warehouse version, mixture, shuffle, remainder or epoch length)."""
        versions, weights = self._identity()
        s = self.sampler
        seed, epoch, position = check_state(sd, versions=versions, weights=weights, epoch_samples=s.epoch_samples,
                                            shuffle=s.shuffle, remainder=s.remainder)
        s.seed = seed
        s.set_epoch(epoch)
        s.start = position  # len(loader) is the rest of the epoch from now on
        self._resume = (epoch, position)
        self._progress = None
