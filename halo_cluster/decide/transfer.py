"""A long transfer said as an operator reads it: bytes done of the total, the rate and the time
left (`12.4 GiB of 20.1 GiB, 48 MiB/s, 2 min 41 s left`), and a stall once no byte arrived for
STALL_SECONDS. Pure: the sizes are read on the node by halo_cluster/node/progress.py, which
feeds them to a `Meter` and says its lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

STALL_SECONDS = 120.0  # no byte for this long: said once, with the node, until bytes flow again
RATE_WINDOW = 60.0  # the rate over the last minute: steady, yet it follows a link that changes
UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(count: float, decimals_below: float = 100) -> str:
    """`count` bytes in binary units: one decimal below `decimals_below` of the unit."""
    value, unit = float(count), 0
    while value >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return f"{int(value)} B"
    return f"{value:.1f} {UNITS[unit]}" if value < decimals_below else f"{value:.0f} {UNITS[unit]}"


def duration(seconds: float) -> str:
    """`41 s`, `2 min 41 s`, `3 h 7 min`: as precise as a person reads a time left."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def rate(samples: Sequence[tuple[float, int]], window: float = RATE_WINDOW) -> float | None:
    """Bytes per second over the (seconds, bytes) samples of the last `window` seconds, from the
    oldest of them to the newest; None with fewer than two or no time between them."""
    if len(samples) < 2:
        return None
    end, last = samples[-1]
    start, first = next((s for s in samples if s[0] >= end - window), samples[-2])
    return (last - first) / (end - start) if end > start else None


def line(done: int, total: int | None, per_second: float | None) -> str:
    """What a progress line says after the node's name and the transfer's."""
    if total is not None and done >= total:
        return f"{size(total)} of {size(total)}, finishing"
    words = [size(done) + (f" of {size(total)}" if total is not None else " so far")]
    if per_second is not None:
        words.append(f"{size(per_second, 10)}/s")
        if total is not None and per_second > 0:
            words.append(f"{duration((total - done) / per_second)} left")
    return ", ".join(words)


@dataclass(frozen=True)
class Expected:
    """What a transfer brings: `total` bytes (None: not known), counted over the files named in
    `names` as they are on disk (partial files included), or, when `names` is None, over every
    file listed, less what was there when the transfer started."""

    total: int | None
    names: frozenset[str] | None = None


def on_disk(listing: str, names: frozenset[str] | None) -> int:
    """The bytes of `NAME SIZE` lines, only of `names` when given. A partial file counts as
    its own: its name up to the first dot (huggingface_hub writes a blob as
    `ETAG.RANDOM.incomplete`, then renames it to `ETAG`)."""
    total = 0
    for row in listing.splitlines():
        name, _, count = row.strip().rpartition(" ")
        if count.isdigit() and (names is None or name.split(".", 1)[0] in names):
            total += int(count)
    return total


def layers_to_fetch(inspected: str, stored: str) -> Expected:
    """An image's pull: the sizes of its layers (`skopeo inspect`'s LayersData as `DIGEST SIZE`
    words) that are not in the user's storage already (`stored`: text naming the digests the
    storage holds, its layers.json), counted as bytes since the pull began."""
    words = inspected.split()
    pairs = zip(words[::2], words[1::2], strict=False)
    layers = {d: int(s) for d, s in pairs if d.startswith("sha256:") and s.isdigit()}
    return Expected(sum(s for d, s in layers.items() if d not in stored) if layers else None)


@dataclass
class Meter:
    """A transfer's samples, from its start: `observe` takes the node's listing of what is on
    disk and returns the progress line, with a stall line the first time no byte arrived for
    `stall` seconds (None otherwise)."""

    expected: Expected
    stall: float = STALL_SECONDS
    samples: list[tuple[float, int]] = field(default_factory=list)
    baseline: int = 0
    progress_at: float = 0.0
    stall_said: bool = False

    def observe(self, at: float, listing: str) -> tuple[str, str | None]:
        counted = on_disk(listing, self.expected.names)
        if not self.samples and self.expected.names is None:
            self.baseline = counted  # a pull's leftovers of an earlier one, not this one's
        done = max(0, counted - self.baseline)
        if not self.samples or done > self.samples[-1][1]:
            self.progress_at, self.stall_said = at, False
        self.samples = [s for s in self.samples if s[0] >= at - RATE_WINDOW] + [(at, done)]
        total = self.expected.total
        waited = at - self.progress_at
        finishing = total is not None and done >= total
        stalled = None
        if waited >= self.stall and not self.stall_said and not finishing:
            self.stall_said = True
            stalled = f"no progress for {duration(waited)} ({line(done, total, None)})"
        return line(done, total, rate(self.samples)), stalled
