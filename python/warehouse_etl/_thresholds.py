"""The validation thresholds a manifest records (manifest.md, ``thresholds``) against
its summary: which limits are exceeded, worded as the Go reader words them
(validate.Thresholds.Evaluate, validate.Finding.Error), and the refusal of a
warehouse over a ``fail`` limit.
"""
import logging

from ._gofmt import format_g
from .errors import ThresholdError

log = logging.getLogger("warehouse_etl")


def evaluate_thresholds(thresholds, total):
    """Every exceeded limit, in the order invalid, missing, empty, max_count before
    max_ratio (Go: validate.Thresholds.Evaluate)."""
    counts = {
        "invalid": total.get("invalid", 0),
        "missing": total.get("missing_image", 0) + total.get("missing_file", 0),
        "empty": total.get("empty", 0),
    }
    n_total = total.get("total", 0)
    out = []
    for name in ("invalid", "missing", "empty"):
        limit = thresholds.get(name) or {}
        n = counts[name]
        action = limit.get("action") or "fail"
        if limit.get("max_count") is not None and n > limit["max_count"]:
            out.append({"threshold": name + ".max_count", "value": float(n), "count": n, "total": n_total,
                        "limit": float(limit["max_count"]), "action": action})
        ratio = n / n_total if n_total > 0 else 0.0
        if limit.get("max_ratio") is not None and ratio > limit["max_ratio"]:
            out.append({"threshold": name + ".max_ratio", "value": ratio, "count": n, "total": n_total,
                        "limit": float(limit["max_ratio"]), "action": action})
    return out


def finding_text(f):
    """One exceeded limit as validate.Finding.Error words it."""
    return (f"threshold {f['threshold']} exceeded: {format_g(f['value'])} ({f['count']} of {f['total']} samples) "
            f"> limit {format_g(f['limit'])} (action {f['action']})")


def check_thresholds(directory, m, thresholds, ignore):
    """Log every exceeded ``warn`` limit of manifest ``m`` (``thresholds`` substitutes
    the recorded limits when not None) and raise :class:`ThresholdError` for the
    ``fail`` ones, unless ``ignore`` (then they are logged as ignored)."""
    findings = evaluate_thresholds(thresholds if thresholds is not None else m["thresholds"],
                                   m["summary"]["total"])
    failed = []
    for f in findings:
        if f["action"] == "warn":
            log.warning("validation threshold exceeded (warn): %s: %s", directory, finding_text(f))
        elif ignore:
            log.warning("validation threshold exceeded (fail), ignored on request: %s: %s", directory,
                        finding_text(f))
        else:
            failed.append(f)
    if failed:
        raise ThresholdError(f"{directory}: refusing a warehouse whose validation summary exceeds its thresholds:"
                             + ";".join(" " + finding_text(f) for f in failed), failed)


__all__ = ["evaluate_thresholds", "finding_text", "check_thresholds"]
