"""Sequence-number checks, per connection.

Two sender profiles exist and neither server checks continuity, so a validator must learn the
profile from the traffic: Beats-style senders restart at 1 in every window (go-lumber client,
lumberjack-client), others keep one counter across windows (pylogbeat, logstash-forwarder, v1
clients). The profile is decided by the first window that follows another one.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirelog.model import Severity

WRAP = 1 << 32
SIGNED_LIMIT = 1 << 31
NO_ISSUES: list = []  # shared empty result: callers only iterate it
PER_WINDOW = "per-window"
CONTINUING = "continuing"


@dataclass(slots=True)
class SeqIssue:
    code: str
    severity: Severity
    text: str
    fields: dict[str, object]


class SequenceChecker:
    """Feeds on every event's seq in arrival order and returns what is wrong with it."""

    __slots__ = ("_last", "_window_start", "profile", "_signed_reported")

    def __init__(self) -> None:
        self._last: int | None = None
        self._window_start = False
        self.profile: str | None = None
        self._signed_reported = False

    def start_window(self) -> None:
        self._window_start = True

    def forget(self) -> None:
        """After a capture gap the previous seq tells nothing about the next one."""
        self._last = None

    def check(self, seq: int) -> list[SeqIssue]:
        last, self._last = self._last, seq
        if last is not None and seq == last + 1 and seq < SIGNED_LIMIT and not self._window_start:
            return NO_ISSUES  # the common case, kept cheap: it runs once per event
        starting, self._window_start = self._window_start, False
        issues: list[SeqIssue] = []
        if seq >= SIGNED_LIMIT and not self._signed_reported:
            self._signed_reported = True
            issues.append(
                SeqIssue(
                    "seq-signed-overflow",
                    Severity.WARNING,
                    f"seq {seq} is at or above 2^31: Logstash stores seqs as signed ints, and a batch "
                    "made only of such seqs never gets its ACK",
                    {"seq": seq},
                )
            )
        if last is None:
            return issues
        following = (last + 1) % WRAP
        if starting:
            issues.extend(self._window_first(seq, last, following))
            return issues
        issues.extend(_within(seq, last, following))
        return issues

    def _window_first(self, seq: int, last: int, following: int) -> list[SeqIssue]:
        if last == WRAP - 1 and seq in (0, 1):
            return [_rollover(seq, last)]
        if self.profile is None and seq != following and seq == 1:
            return [self._decide(PER_WINDOW)]
        if self.profile is None and seq == following:
            return [self._decide(CONTINUING)]
        expected = 1 if self.profile == PER_WINDOW else following
        if seq == expected:
            return []
        return [
            SeqIssue(
                "seq-window-start",
                Severity.WARNING,
                f"window starts at seq {seq}; expected {expected} "
                f"({self.profile or 'continuing'} profile, previous seq {last})",
                {"seq": seq, "expected": expected, "previous": last, "profile": self.profile},
            )
        ]

    def _decide(self, profile: str) -> SeqIssue:
        self.profile = profile
        text = (
            "sequence numbers restart at 1 in every window (Beats / go-lumber / lumberjack-client profile)"
            if profile == PER_WINDOW
            else "sequence numbers continue across windows (pylogbeat / logstash-forwarder / v1 profile)"
        )
        return SeqIssue("seq-profile", Severity.INFO, text, {"profile": profile})


def _rollover(seq: int, last: int) -> SeqIssue:
    return SeqIssue(
        "seq-rollover",
        Severity.INFO,
        f"sequence wrapped from {last} to {seq} (2^32 rollover)",
        {"seq": seq, "previous": last},
    )


def _within(seq: int, last: int, following: int) -> list[SeqIssue]:
    if seq == following:
        return [_rollover(seq, last)] if seq == 0 else []
    if last == WRAP - 1 and seq == 1:
        return [_rollover(seq, last)]
    if seq == last:
        return [SeqIssue("seq-duplicate", Severity.WARNING, f"seq {seq} repeated", {"seq": seq})]
    if seq > following:
        missing = seq - following
        return [
            SeqIssue(
                "seq-gap",
                Severity.WARNING,
                f"seq jumps from {last} to {seq}: {missing} missing",
                {"seq": seq, "previous": last, "missing": missing},
            )
        ]
    return [
        SeqIssue(
            "seq-non-monotonic",
            Severity.WARNING,
            f"seq {seq} after {last} (goes backwards)",
            {"seq": seq, "previous": last},
        )
    ]
