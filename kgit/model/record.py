"""The record of one iteration: a typed value, parsed and validated where it enters, written in one place.

A record travels as JSON in a git note (refs/notes/kgit), and notes come from anywhere: other clones,
a hand edit, a truncated write. So a note is untrusted input. `parse_note` turns its text into valid
records and, for whatever is not one, an InvalidNote that names the commit and the reason; nothing is
dropped without a word and nothing crashes a command later on a wrong type.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from dataclasses import dataclass, field

RECORD_VERSION = 1


class Status(str, enum.Enum):
    """What a step's decision was. Kept iterations are commits on the branch; the rest are attempts."""

    BASELINE = "BASELINE"
    IMPROVED = "IMPROVED"
    TARGET_MET = "TARGET_MET"
    KEPT_ANYWAY = "KEPT_ANYWAY"  # slower, kept on the branch for a reason written down; never the best
    WITHIN_NOISE = "WITHIN_NOISE"
    REGRESSED = "REGRESSED"
    FAILED = "FAILED"

    @property
    def kept(self) -> bool:
        """A best candidate: it was shown better than the best before it (or is the baseline)."""
        return self in (Status.BASELINE, Status.IMPROVED, Status.TARGET_MET)

    @property
    def on_branch(self) -> bool:
        """Its commit stays on opt/<kernel> (the others are reverted attempts)."""
        return self.kept or self is Status.KEPT_ANYWAY

    def __str__(self) -> str:
        return self.value


class StopReason(str, enum.Enum):
    """Why a loop is over."""

    TARGET_MET = "TARGET_MET"
    MAX_ITERATIONS = "MAX_ITERATIONS"
    SPACE_EXHAUSTED = "SPACE_EXHAUSTED"
    AGENT_FAILING = "AGENT_FAILING"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Record:
    kernel: str
    iteration: int
    action: str
    status: Status
    started: str | None = None  # ISO time in UTC, microseconds: with kernel, iteration and GPU it names a run
    tier: int | None = None
    gpu: str | None = None
    cpu_timing: bool = False
    correctness: bool | None = None  # None: the test never said (crash, timeout, interrupted)
    metric: str | None = None  # "gbps" or "tflops"
    value: float | None = None
    spread_pct: float | None = None
    peak: float | None = None
    pct_of_peak: float | None = None
    target: float | None = None
    best_before: float | None = None
    delta_pct: float | None = None
    reason: str | None = None
    stop_reason: StopReason | None = None
    test: dict | None = None  # the test's own JSON, unchanged
    output_tail: str | None = None
    base: str | None = None  # the commit the iteration started from
    duration_s: float = 0.0
    options: dict | None = None  # the baseline's: the options given to 'kgit start'
    # the paired re-measurement that decided it: samples, log-ratios, interval (kgit.model.noise)
    measurement: dict | None = None
    environment: dict | None = None  # where it was measured (kgit.device.environment)
    profile: dict | None = None
    diagnosis: dict | None = None
    version: int = RECORD_VERSION
    # keys this kgit does not know (a newer kgit wrote them): kept and written back unchanged
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def kept(self) -> bool:
        return self.status.kept

    @property
    def key(self) -> tuple:
        """What makes two records the same run: two clones that both reach iteration 3 made two runs."""
        return self.kernel, self.iteration, self.started, self.gpu

    def replace(self, **changes) -> Record:
        return dataclasses.replace(self, **changes)


class InvalidRecord(ValueError):
    """A JSON value that is not a valid record; the message says which key and why."""


@dataclass(frozen=True)
class InvalidNote:
    """A note, or a part of one, that is not a valid record: reported, never used to decide."""

    commit: str
    reason: str

    def describe(self) -> str:
        return f"the note on {self.commit[:10]} is not a valid kgit record ({self.reason})"


_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_JSON_KEYS = {f.name: f.name for f in dataclasses.fields(Record) if f.name != "extra"}
_JSON_KEYS["version"] = "kgit"  # the field's name in the JSON, as records have always been written


def is_object_id(text) -> bool:
    """A full hexadecimal object id (SHA-1 or SHA-256): safe to hand to git, never read as an option."""
    return isinstance(text, str) and _OBJECT_ID.fullmatch(text) is not None


def _number(value, key, *, positive=False, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRecord(f"{key} must be a finite number, not {value!r}")
    if positive and value <= 0:
        raise InvalidRecord(f"{key} must be above 0, not {value!r}")
    return float(value)


def _typed(value, key, types, what):
    if value is None:
        return None
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        raise InvalidRecord(f"{key} must be {what}, not {value!r}")
    return value


def from_json(data) -> Record:
    """A Record from a JSON object; InvalidRecord names the first key that is missing or wrong."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"a record is a JSON object, not {type(data).__name__}")
    for key in ("kernel", "iteration", "action", "status"):
        if key not in data:
            raise InvalidRecord(f"missing key {key!r}")
    kernel = _typed(data["kernel"], "kernel", (str,), "a string")
    if not kernel:
        raise InvalidRecord("kernel must be a name")
    iteration = _typed(data["iteration"], "iteration", (int,), "an integer")
    if iteration is None or iteration < 0:
        raise InvalidRecord(f"iteration must be 0 or more, not {data['iteration']!r}")
    try:
        status = Status(data["status"])
    except ValueError:
        raise InvalidRecord(f"status {data['status']!r} is none of {', '.join(s.value for s in Status)}") from None
    stop = data.get("stop_reason")
    try:
        stop_reason = StopReason(stop) if stop is not None else None
    except ValueError:
        raise InvalidRecord(f"stop_reason {stop!r} is none of {', '.join(s.value for s in StopReason)}") from None
    base = data.get("base")
    if base is not None and not is_object_id(base):
        raise InvalidRecord(f"base must be a full object id, not {base!r}")
    tier = _typed(data.get("tier"), "tier", (int,), "an integer from 1 to 5")
    if tier is not None and not 1 <= tier <= 5:
        raise InvalidRecord(f"tier must be an integer from 1 to 5, not {tier!r}")
    metric = _typed(data.get("metric"), "metric", (str,), "a string")
    value = _number(data.get("value"), "value", positive=True)
    if status.on_branch and value is None:
        raise InvalidRecord(f"a kept record ({status.value}) needs a value")
    known = {json_key: name for name, json_key in _JSON_KEYS.items()}
    return Record(
        kernel=kernel,
        iteration=iteration,
        action=_typed(data["action"], "action", (str,), "a string"),
        status=status,
        started=_typed(data.get("started"), "started", (str,), "a time"),
        tier=tier,
        gpu=_typed(data.get("gpu"), "gpu", (str,), "a string"),
        cpu_timing=bool(_typed(data.get("cpu_timing"), "cpu_timing", (bool,), "true or false")),
        correctness=_typed(data.get("correctness"), "correctness", (bool,), "true, false or null"),
        metric=metric,
        value=value,
        spread_pct=_number(data.get("spread_pct"), "spread_pct"),
        peak=_number(data.get("peak"), "peak", positive=True),
        pct_of_peak=_number(data.get("pct_of_peak"), "pct_of_peak"),
        target=_number(data.get("target"), "target", positive=True),
        best_before=_number(data.get("best_before"), "best_before"),
        delta_pct=_number(data.get("delta_pct"), "delta_pct"),
        reason=_typed(data.get("reason"), "reason", (str,), "a string"),
        stop_reason=stop_reason,
        test=_typed(data.get("test"), "test", (dict,), "an object"),
        output_tail=_typed(data.get("output_tail"), "output_tail", (str,), "a string"),
        base=base,
        duration_s=_number(data.get("duration_s", 0.0), "duration_s", allow_none=False),
        options=_typed(data.get("options"), "options", (dict,), "an object"),
        measurement=_typed(data.get("measurement"), "measurement", (dict,), "an object"),
        environment=_typed(data.get("environment"), "environment", (dict,), "an object"),
        profile=_typed(data.get("profile"), "profile", (dict,), "an object"),
        diagnosis=_typed(data.get("diagnosis"), "diagnosis", (dict,), "an object"),
        version=_typed(data.get("kgit", RECORD_VERSION), "kgit", (int,), "a version number"),
        extra={k: v for k, v in data.items() if k not in known},
    )


def to_json(record: Record) -> dict:
    """The record as the JSON object kgit writes (and prints under --json)."""
    data = {json_key: getattr(record, name) for name, json_key in _JSON_KEYS.items()}
    data["status"] = record.status.value
    data["stop_reason"] = record.stop_reason.value if record.stop_reason else None
    for attachment in ("options", "measurement", "environment", "profile", "diagnosis"):  # not in every record
        if data[attachment] is None:
            del data[attachment]
    return {**record.extra, **data}


def note_text(records: list[Record]) -> str:
    """A note's text: one record, or several one after another when runs share a commit."""
    return "".join(json.dumps(to_json(r), indent=2, sort_keys=True) + "\n" for r in records)


def parse_note(commit: str, text: str) -> tuple[list[Record], list[InvalidNote]]:
    """The records in a note's text (JSON objects one after another) and what in it is not one."""
    decoder, records, invalid, pos = json.JSONDecoder(), [], [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return records, invalid
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            invalid.append(InvalidNote(commit, f"not JSON at character {e.pos}: {e.msg}"))
            return records, invalid
        try:
            records.append(from_json(value))
        except InvalidRecord as e:
            invalid.append(InvalidNote(commit, str(e)))
