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

from kgit.model import kernel_name
from kgit.errors import KgitError, shown

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
    SPACE_EXHAUSTED = "SPACE_EXHAUSTED"  # kgit tune measured every configuration it may run
    # kgit tune: every neighbour of the best was measured and no configuration left is expected to gain
    # min_gain_pct (kgit.model.search); configurations remain, but none worth an iteration
    NO_EXPECTED_GAIN = "NO_EXPECTED_GAIN"
    AGENT_FAILING = "AGENT_FAILING"
    TIERS_TRIED = "TIERS_TRIED"  # every tier of the diagnosis' order was tried: the context says stop

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Spread:
    """What kgit start measured of the noise in the baseline's counted runs (kgit.model.decide.start_spread)."""

    runs: int
    test: list[float]  # the test's figure in each run
    sd_pct: dict[str, float]  # run to run, of each figure measured: 'test', 'device'
    decides_on: str  # the figure whose pairs decide the loop's steps: 'test' or 'device'
    max_pairs: int
    smallest_keepable_pct: float | None  # the smallest change a step can keep at max_pairs; None: unknown
    why: str | None = None  # why the noise is large, where kgit can tell
    device_us: list[float] | None = None  # kgit's device time of each run, where every run recorded one
    extra: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Environment:
    """Where a record was measured, as kgit.machine.environment reads it: each a line of text, None where
    it could not be read."""

    host: str | None = None
    device: str | None = None  # 'nvidia', 'amd' or 'cpu' (Triton's interpreter)
    gpu: str | None = None  # the GPU's name
    gpu_uuid: str | None = None
    driver: str | None = None
    cpu: str | None = None  # the processor, where the test ran on the CPU
    python: str | None = None
    torch: str | None = None
    triton: str | None = None
    clock_sm_mhz: str | None = None  # the clocks when the step began (they move: not compared)
    clock_sm_max_mhz: str | None = None
    clock_mem_mhz: str | None = None
    clock_events: str | None = None
    extra: dict = field(default_factory=dict, compare=False)  # keys a newer kgit wrote: written back


# The environment's fields that make two measurements comparable; the clocks move from run to run.
_SAME_ENVIRONMENT = ("host", "device", "gpu_uuid", "driver", "torch", "triton")


def same_environment(a: Environment | None, b: Environment | None) -> bool:
    """Whether figures measured in a and in b compare: the same machine, device, driver and compilers
    (never where either is unknown)."""
    return a is not None and b is not None and all(getattr(a, k) == getattr(b, k) for k in _SAME_ENVIRONMENT)


@dataclass(frozen=True)
class Measurement:
    """The runs that decided a record: the pairs of the best and the candidate (kgit.model.noise), or the
    baseline's counted runs and the noise its start measured (spread, kgit.model.decide.start_spread)."""

    best: list[float] = field(default_factory=list)  # the best's counted figures, in the order taken
    candidate: list[float] = field(default_factory=list)
    log_ratios: list[float] = field(default_factory=list)  # of each pair: what the interval is of
    runs: int = 0  # every test run, warm-ups included
    warmups: int = 0
    verdict: str | None = None  # 'better', 'worse', 'noise'; None where a run failed
    gain_pct: float | None = None
    interval_pct: list[float] | None = None  # [low, high], the 95% interval of the gain
    sd: float | None = None
    rounding: float = 0.0
    df: float | None = None
    decided_on: str = "test"  # whose figures the pairs compare: the test's, or kgit's device time
    # kgit's device time of each counted run (None where none was recorded), beside the figures
    device_us: dict | None = None
    figure: str | None = None  # which of the test's figures was read, where it printed several
    spread: Spread | None = None  # the baseline's: what kgit start measured of the noise
    extra: dict = field(default_factory=dict, compare=False)  # keys a newer kgit wrote: written back

    @property
    def pairs(self) -> int:
        return len(self.log_ratios)


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
    # which of the iteration's runs `test` is: its figures are that run's, beside a value that is the
    # median of the counted runs (None in records that kept no test output, and in those before the key)
    test_run: str | None = None
    output_tail: str | None = None
    base: str | None = None  # the commit the iteration started from
    duration_s: float = 0.0
    options: dict | None = None  # the options given to the command that made it ('kgit start', a step)
    measurement: Measurement | None = None  # the runs that decided it
    environment: Environment | None = None  # where it was measured (kgit.machine.environment)
    profile: dict | None = None
    diagnosis: dict | None = None
    # an agent's turn that made the change (kgit run --agent): its command, the context it was given,
    # what it printed (both bounded), how long it took
    agent: dict | None = None
    # the earlier iteration whose kernel code this one measured again (kgit step --again)
    repeats: int | None = None
    # the kernel file's Triton kernels its test launched in the run this record speaks for (kgit's device
    # timing); None where none was recorded. What the next step's change may touch (kgit.model.coverage).
    launched: tuple[str, ...] | None = None
    # what this change touched that the test never ran, stepped with --allow-untested: its verdict says
    # nothing of them
    untested: tuple[str, ...] | None = None
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

    def to_json(self) -> dict:
        return {"commit": self.commit, "reason": self.reason}


_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_JSON_KEYS = {f.name: f.name for f in dataclasses.fields(Record) if f.name != "extra"}
_JSON_KEYS["version"] = "kgit"  # the field's name in the JSON, as records have always been written


def is_object_id(text) -> bool:
    """A full hexadecimal object id (SHA-1 or SHA-256): safe to hand to git, never read as an option."""
    return isinstance(text, str) and _OBJECT_ID.fullmatch(text) is not None


# The optional fields by the check they get where a note enters (the others are checked one by one).
_TEXTS = ("started", "gpu", "metric", "reason", "output_tail", "test_run")
_NUMBERS = ("spread_pct", "pct_of_peak", "best_before", "delta_pct")
_POSITIVE_NUMBERS = ("value", "peak", "target")
_OBJECTS = ("test", "options", "profile", "diagnosis", "agent")
_KNOWN = set(_JSON_KEYS.values())

# What kgit writes stays small: an action of one line (500 characters), a test's last 2,000 characters
# of output, an agent's texts of 8,000, a profile's summary. A note of megabytes is no record of kgit's,
# and the log and README that show it would be megabytes too: such a note is invalid, never rendered.
MAX_RECORD_CHARS = 256_000  # the record's JSON text, the test's JSON and every attachment included
_MAX_CHARS = {"action": 1_000, "started": 100, "gpu": 200, "metric": 100, "reason": 8_000, "output_tail": 8_000,
              "test_run": 1_000}
_MAX_NAMES, _MAX_NAME_CHARS = 1_000, 200  # of launched or untested: a kernel file's functions


def from_json(data) -> Record:
    """A Record from a JSON object; InvalidRecord names the first key that is missing or wrong.

    Written for speed as well as clarity: a team's commands parse thousands of records each.
    """
    if type(data) is not dict:
        raise InvalidRecord(f"a record is a JSON object, not {type(data).__name__}")
    for key in ("kernel", "iteration", "action", "status"):
        if key not in data:
            raise InvalidRecord(f"missing key {shown(key)}")
    fields = {}
    for key in _TEXTS:
        value = data.get(key)
        if value is not None and type(value) is not str:
            raise InvalidRecord(f"{key} must be a string, not {shown(value)}")
        if value is not None and len(value) > _MAX_CHARS[key]:
            raise InvalidRecord(f"{key} is {len(value)} characters long, over {_MAX_CHARS[key]}")
        fields[key] = value
    for key in _NUMBERS + _POSITIVE_NUMBERS:
        value = data.get(key)
        if value is not None:
            if not _finite(value):
                raise InvalidRecord(f"{key} must be a finite number, not {shown(value)}")
            if value <= 0 and key in _POSITIVE_NUMBERS:
                raise InvalidRecord(f"{key} must be above 0, not {shown(value)}")
            value = float(value)
        fields[key] = value
    for key in _OBJECTS:
        value = data.get(key)
        if value is not None and type(value) is not dict:
            raise InvalidRecord(f"{key} must be an object, not {shown(value)}")
        fields[key] = value

    kernel, iteration, action = data["kernel"], data["iteration"], data["action"]
    if type(kernel) is not str or not kernel:
        raise InvalidRecord(f"kernel must be a string that names it, not {shown(kernel)}")
    try:
        kernel_name.check(kernel)  # it names a branch, a tag and a file of the notes index
    except KgitError:
        raise InvalidRecord(f"kernel {shown(kernel)} is no valid kernel name") from None
    if type(iteration) is not int:
        raise InvalidRecord(f"iteration must be an integer, not {shown(iteration)}")
    if iteration < 0:
        raise InvalidRecord(f"iteration must be 0 or more, not {shown(iteration)}")
    if type(action) is not str:
        raise InvalidRecord(f"action must be a string, not {shown(action)}")
    if len(action) > _MAX_CHARS["action"]:
        raise InvalidRecord(f"action is {len(action)} characters long, over {_MAX_CHARS['action']}")
    try:
        status = Status(data["status"])
    except ValueError:
        raise InvalidRecord(f"status {shown(data['status'])} is none of {', '.join(s.value for s in Status)}") from None
    stop = data.get("stop_reason")
    try:
        stop_reason = StopReason(stop) if stop is not None else None
    except ValueError:
        raise InvalidRecord(f"stop_reason {shown(stop)} is none of {', '.join(s.value for s in StopReason)}") from None
    base = data.get("base")
    if base is not None and not is_object_id(base):
        raise InvalidRecord(f"base must be a full object id, not {shown(base)}")
    tier = data.get("tier")
    if tier is not None and (type(tier) is not int or not 1 <= tier <= 5):
        raise InvalidRecord(f"tier must be an integer from 1 to 5, not {shown(tier)}")
    correctness = data.get("correctness")
    if correctness is not None and type(correctness) is not bool:
        raise InvalidRecord(f"correctness must be true, false or null, not {shown(correctness)}")
    cpu_timing = data.get("cpu_timing", False)
    if cpu_timing is not None and type(cpu_timing) is not bool:
        raise InvalidRecord(f"cpu_timing must be true or false, not {shown(cpu_timing)}")
    duration = data.get("duration_s", 0.0)
    if type(duration) not in (int, float) or not math.isfinite(duration):
        raise InvalidRecord(f"duration_s must be a finite number, not {shown(duration)}")
    repeats = data.get("repeats")
    if repeats is not None and (type(repeats) is not int or repeats < 0):
        raise InvalidRecord(f"repeats must be an iteration number, not {shown(repeats)}")
    names = {key: _names(data.get(key), key) for key in ("launched", "untested")}
    measurement = data.get("measurement")
    if measurement is not None:
        measurement = measurement_from_json(measurement)
    environment = data.get("environment")
    if environment is not None:
        environment = environment_from_json(environment)
    version = data.get("kgit", RECORD_VERSION)
    if type(version) is not int:
        raise InvalidRecord(f"kgit must be a version number, not {shown(version)}")
    if status.on_branch and fields["value"] is None:
        raise InvalidRecord(f"a kept record ({status.value}) needs a value")
    return Record(kernel=kernel, iteration=iteration, action=action, status=status, tier=tier,
                  cpu_timing=bool(cpu_timing), correctness=correctness, stop_reason=stop_reason, base=base,
                  duration_s=float(duration), repeats=repeats, version=version, measurement=measurement,
                  environment=environment, **names,
                  extra={k: v for k, v in data.items() if k not in _KNOWN}, **fields)


_MEASURED_LISTS = ("best", "candidate", "log_ratios")
_MEASURED_COUNTS = ("runs", "warmups")
_MEASURED_NUMBERS = ("gain_pct", "sd", "df")
_VERDICTS = (None, "better", "worse", "noise")
_DECIDED_ON = ("test", "device")
_MAX_RUNS = 10_000  # figures in one of a measurement's lists: kgit's pairs are capped far below


def measurement_from_json(data) -> Measurement:
    """A Measurement from a record's JSON; InvalidRecord names the first key that is wrong."""
    if type(data) is not dict:
        raise InvalidRecord(f"measurement must be an object, not {shown(data)}")
    fields = {}
    for key in _MEASURED_LISTS:
        value = data.get(key, [])
        if not _figures(value):
            raise InvalidRecord(f"measurement.{key} must be a list of finite numbers, not {shown(value)}")
        fields[key] = value
    for key in _MEASURED_COUNTS:
        value = data.get(key, 0)
        if type(value) is not int or value < 0:
            raise InvalidRecord(f"measurement.{key} must be a count, not {shown(value)}")
        fields[key] = value
    for key in _MEASURED_NUMBERS:
        value = data.get(key)
        if value is not None and not _finite(value):
            raise InvalidRecord(f"measurement.{key} must be a finite number, not {shown(value)}")
        fields[key] = value
    rounding = data.get("rounding", 0.0)
    if not _finite(rounding) or rounding < 0:
        raise InvalidRecord(f"measurement.rounding must be a number of 0 or more, not {shown(rounding)}")
    interval = data.get("interval_pct")
    if interval is not None and (type(interval) is not list or len(interval) != 2 or not all(map(_finite, interval))
                                 or interval[0] > interval[1]):
        raise InvalidRecord(f"measurement.interval_pct must be [low, high], not {shown(interval)}")
    verdict, decided_on = data.get("verdict"), data.get("decided_on", "test")
    if verdict not in _VERDICTS:
        raise InvalidRecord(f"measurement.verdict {shown(verdict)} is none of better, worse, noise")
    if decided_on not in _DECIDED_ON:
        raise InvalidRecord(f"measurement.decided_on {shown(decided_on)} is neither test nor device")
    device_us = data.get("device_us")
    if device_us is not None and (type(device_us) is not dict or not all(
            _figures(device_us.get(side, []), missing_ok=True) for side in ("best", "candidate"))):
        raise InvalidRecord(f"measurement.device_us must hold lists of device times, not {shown(device_us)}")
    figure, spread = data.get("figure"), data.get("spread")
    if figure is not None and (type(figure) is not str or len(figure) > 1_000):
        raise InvalidRecord(f"measurement.figure must be a figure's name, not {shown(figure)}")
    return Measurement(**fields, rounding=rounding, interval_pct=interval, verdict=verdict, decided_on=decided_on,
                       device_us=device_us, figure=figure, spread=None if spread is None else spread_from_json(spread),
                       extra={k: v for k, v in data.items() if k not in _MEASUREMENT_KEYS})


def spread_from_json(data) -> Spread:
    """A Spread from a baseline's measurement; InvalidRecord names the first key that is wrong."""
    if type(data) is not dict:
        raise InvalidRecord(f"measurement.spread must be an object, not {shown(data)}")
    runs, test, device = data.get("runs"), data.get("test"), data.get("device_us")
    if type(runs) is not int or runs < 0:
        raise InvalidRecord(f"measurement.spread.runs must be a count, not {shown(runs)}")
    for key, value in (("test", test), ("device_us", device)):
        if not _figures(value) and (value is not None or key == "test"):  # a start without device time has none
            raise InvalidRecord(f"measurement.spread.{key} must be a list of finite numbers, not {shown(value)}")
    sd_pct, decides_on, max_pairs = data.get("sd_pct"), data.get("decides_on"), data.get("max_pairs")
    if type(sd_pct) is not dict or not set(sd_pct) <= set(_DECIDED_ON) or not all(
            _finite(v) and v >= 0 for v in sd_pct.values()):
        raise InvalidRecord(f"measurement.spread.sd_pct must give test's and device's spread, not {shown(sd_pct)}")
    if decides_on not in _DECIDED_ON:
        raise InvalidRecord(f"measurement.spread.decides_on {shown(decides_on)} is neither test nor device")
    if type(max_pairs) is not int or max_pairs < 1:
        raise InvalidRecord(f"measurement.spread.max_pairs must be a count of pairs, not {shown(max_pairs)}")
    keepable, why = data.get("smallest_keepable_pct"), data.get("why")
    if keepable is not None and (not _finite(keepable) or keepable < 0):
        raise InvalidRecord(f"measurement.spread.smallest_keepable_pct must be a percentage, not {shown(keepable)}")
    if why is not None and (type(why) is not str or len(why) > _MAX_CHARS["reason"]):
        raise InvalidRecord(f"measurement.spread.why must be a line of text, not {shown(why)}")
    return Spread(runs=runs, test=test, sd_pct=sd_pct, decides_on=decides_on, max_pairs=max_pairs,
                  smallest_keepable_pct=keepable, why=why, device_us=device,
                  extra={k: v for k, v in data.items() if k not in _SPREAD_KEYS})


_ENVIRONMENT_KEYS = tuple(f.name for f in dataclasses.fields(Environment) if f.name != "extra")
_MAX_ENVIRONMENT_CHARS = 200


def environment_from_json(data) -> Environment:
    """An Environment from a record's JSON; InvalidRecord names the first key that is wrong."""
    if type(data) is not dict:
        raise InvalidRecord(f"environment must be an object, not {shown(data)}")
    for key in _ENVIRONMENT_KEYS:
        value = data.get(key)
        if value is not None and (type(value) is not str or len(value) > _MAX_ENVIRONMENT_CHARS):
            raise InvalidRecord(f"environment.{key} must be a line of text, not {shown(value)}")
    return Environment(**{k: data.get(k) for k in _ENVIRONMENT_KEYS},
                       extra={k: v for k, v in data.items() if k not in _ENVIRONMENT_KEYS})


def environment_to_json(environment: Environment) -> dict:
    """What was read of the environment: the fields that could not be read are left out."""
    return {k: v for k, v in _fields_json(environment).items() if v is not None}


def measurement_to_json(measurement: Measurement) -> dict:
    data = _fields_json(measurement)
    data["pairs"] = measurement.pairs  # derived, written for those who read notes by hand
    if measurement.spread is not None:
        data["spread"] = _fields_json(measurement.spread)
        if measurement.spread.device_us is None:
            del data["spread"]["device_us"]
    for optional in ("device_us", "figure", "spread"):  # in the measurements that have them only
        if data[optional] is None:
            del data[optional]
    return data


def _fields_json(value) -> dict:
    """A dataclass's fields as JSON, the keys a newer kgit wrote (extra) kept beside them."""
    return {**value.extra, **{f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.name != "extra"}}


_MEASUREMENT_KEYS = {f.name for f in dataclasses.fields(Measurement)} | {"pairs"}
_SPREAD_KEYS = {f.name for f in dataclasses.fields(Spread)}


def _finite(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type(): a bool is no number


def _figures(value, missing_ok: bool = False) -> bool:
    """A list of at most _MAX_RUNS finite numbers; with missing_ok, None stands where a run recorded none."""
    return type(value) is list and len(value) <= _MAX_RUNS and all(
        _finite(v) or (missing_ok and v is None) for v in value)


def _names(value, key: str) -> tuple[str, ...] | None:
    """A list of the names of a kernel file's functions, as a record holds it."""
    if value is None:
        return None
    if type(value) is not list or len(value) > _MAX_NAMES or any(
            type(name) is not str or not 0 < len(name) <= _MAX_NAME_CHARS for name in value):
        raise InvalidRecord(f"{key} must be a list of at most {_MAX_NAMES} names, not {shown(value)}")
    return tuple(value)


def to_json(record: Record) -> dict:
    """The record as the JSON object kgit writes (and prints under --json)."""
    data = {json_key: getattr(record, name) for name, json_key in _JSON_KEYS.items()}
    data["status"] = record.status.value
    data["stop_reason"] = record.stop_reason.value if record.stop_reason else None
    if record.measurement is not None:
        data["measurement"] = measurement_to_json(record.measurement)
    if record.environment is not None:
        data["environment"] = environment_to_json(record.environment)
    for attachment in ("options", "measurement", "environment", "profile", "diagnosis", "agent"):  # not in every record
        if data[attachment] is None:
            del data[attachment]
    for optional in ("repeats", "launched", "untested", "test_run"):  # in the records that have them only
        if data[optional] is None:
            del data[optional]
        elif optional in ("launched", "untested"):
            data[optional] = list(data[optional])
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
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            invalid.append(InvalidNote(commit, f"not JSON at character {e.pos}: {e.msg}"))
            return records, invalid
        size, pos = end - pos, end
        if size > MAX_RECORD_CHARS:
            invalid.append(InvalidNote(commit, f"a record of {size} characters, over {MAX_RECORD_CHARS}"))
            continue
        try:
            records.append(from_json(value))
        except InvalidRecord as e:
            invalid.append(InvalidNote(commit, str(e)))
