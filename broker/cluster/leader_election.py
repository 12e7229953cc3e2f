"""The controller's choices of a partition's leader and ISR, as pure functions of a partition
state (the znode's document: leader, leader_epoch, isr, controller_epoch) and the brokers
alive: Kafka's PartitionLeaderElectionAlgorithms and the ZooKeeper-era controller's state
changes. The controller (controller.py) reads the states, calls these, and writes what they
return, fenced by its epoch; nothing here reads or writes ZooKeeper.
"""

from __future__ import annotations

from typing import Any

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type

State = dict[str, Any]  # a partition state znode's document


def offline_candidates(doc: State, replicas: list[int], live: set[int] | frozenset[int],
                       unclean: bool) -> list[int]:
    """Kafka's offlinePartitionLeaderElection: live ISR members in assignment order, or (only
    when none is alive and unclean election is allowed) any live replica."""
    candidates = [r for r in replicas if r in live and r in doc["isr"]]
    if not candidates and unclean:
        candidates = [r for r in replicas if r in live]
    return candidates


def led_by(doc: State, leader: int, isr: list[int], controller_epoch: int) -> State:
    """The partition state `doc` with a new leader and ISR, at the next leader epoch and the
    controller's epoch (every election writes this shape)."""
    return {**doc, "leader": leader, "leader_epoch": doc["leader_epoch"] + 1, "isr": isr,
            "controller_epoch": controller_epoch}


def next_state(
    doc: State, replicas: list[int], live: set[int], unclean: bool, controller_epoch: int,
    eligible: set[int] | None = None, restarted: set[int] | frozenset[int] = frozenset(),
) -> State | None:
    """What the controller's reconciliation writes for a partition, None if nothing: its dead
    ISR members dropped, and a new leader if its leader is gone. `eligible`: the live brokers
    that may be elected (not shutting down). `restarted`: brokers registered again in a new
    life, not in `live` (their previous life failed): when no live ISR member is left, one of
    them is elected at once (the failure and the start-up in one write: one leader epoch, no
    time offline) before any unclean choice."""
    leader, isr = doc["leader"], list(doc["isr"])
    live_isr = [r for r in isr if r in live]
    if leader in live:
        if live_isr == isr:
            return None
        return {**doc, "isr": live_isr, "controller_epoch": controller_epoch}
    eligible = live if eligible is None else eligible
    candidates = offline_candidates(doc, replicas, eligible, False)
    if not candidates and restarted:
        candidates = offline_candidates(doc, replicas, eligible | restarted, False)
        if leader in candidates:  # re-established where it was, as Kafka's LeaderAndIsr
            candidates = [leader]  # to a starting broker keeps it
        if candidates:
            live = live | restarted
            live_isr = [r for r in isr if r in live]
    if not candidates and unclean:
        candidates = offline_candidates(doc, replicas, eligible, True)
    if not candidates:
        if leader == -1:
            return None  # offline until an ISR member returns
        # Keep the last ISR (Kafka does) so that only one of those can lead again.
        new_leader, new_isr = -1, isr
    else:
        new_leader = candidates[0]
        new_isr = live_isr if new_leader in live_isr else [new_leader]
    return led_by(doc, new_leader, new_isr, controller_epoch)


def shutdown_state(doc: State, broker_id: int, replicas: list[int], live: set[int],
                   shutting_down: set[int], controller_epoch: int) -> State | None:
    """What a controlled shutdown of `broker_id` writes for a partition whose leader or ISR
    names it (Kafka's doControlledShutdown), None if nothing: a leadership moves to the first
    live replica in the ISR that is not shutting down (ControlledShutdownPartitionLeader-
    ElectionStrategy), and stays where it is when there is none; a follower leaves the ISR
    (OfflineReplica) unless it is the last member."""
    isr = [r for r in doc["isr"] if r not in shutting_down]
    if doc["leader"] == broker_id:
        candidates = [r for r in replicas if r in isr and r in live]
        return led_by(doc, candidates[0], isr, controller_epoch) if candidates else None
    if broker_id in doc["isr"] and isr:
        return {**doc, "isr": isr, "controller_epoch": controller_epoch}
    return None


def elected_state(election_type: int, doc: State, replicas: list[int], live: set[int],
                  controller_epoch: int) -> State | None:
    """An admin's election (ElectLeaders) of a partition: its new state, or None when no
    replica may lead under that election."""
    if election_type == PREFERRED:
        # Kafka's preferredReplicaPartitionLeaderElection: the first assigned replica, if
        # alive and in the ISR; the ISR stays as it is.
        preferred = replicas[0]
        if preferred not in live or preferred not in doc["isr"]:
            return None
        new_leader, new_isr = preferred, list(doc["isr"])
    else:
        # offlinePartitionLeaderElection with unclean allowed (asked for by an admin)
        candidates = offline_candidates(doc, replicas, live, True)
        if not candidates:
            return None
        new_leader = candidates[0]
        live_isr = [r for r in doc["isr"] if r in live]
        new_isr = live_isr if new_leader in live_isr else [new_leader]
    return led_by(doc, new_leader, new_isr, controller_epoch)


def assignment_state(doc: State, replicas: list[int], live_here: set[int],
                     controller_epoch: int) -> State:
    """The partition state for a reassignment's new replica set: leader epoch + 1; replicas
    leaving the set (the adding replicas of a replaced or cancelled reassignment) leave the
    ISR, and if the leader is one of them the first live ISR member of the set takes over."""
    isr = [r for r in doc["isr"] if r in replicas]
    leader = doc["leader"]
    if leader not in replicas:
        candidates = [r for r in replicas if r in isr and r in live_here]
        leader = candidates[0] if candidates else -1
    # (no ISR member left in the set: the last ISR stays, as Kafka keeps an ISR's last member
    # when its replica goes offline)
    return led_by(doc, leader, isr or list(doc["isr"]), controller_epoch)


def completed_reassignment_state(doc: State, target: list[int], live: set[int],
                                 controller_epoch: int) -> State | None:
    """The state that completes a reassignment whose target replicas are all in the ISR: the
    ISR without the removed replicas, leader epoch + 1, and a leader outside the target (or
    not alive) replaced by the first live target replica in the ISR (Kafka's
    ReassignPartitionLeaderElectionStrategy); None while there is none."""
    leader = doc["leader"]
    isr = [r for r in doc["isr"] if r in target]
    if leader not in target or leader not in live:
        candidates = [r for r in target if r in isr and r in live]
        if not candidates:
            return None
        leader = candidates[0]
    return led_by(doc, leader, isr, controller_epoch)


def invalid_target(target: list[int], original: list[int], live: set[int]) -> str | None:
    """Kafka's validateReplicas of a reassignment's target replicas: the error message, or
    None when valid (replicas being added must be alive brokers)."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {target}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {target}"
    adding = [r for r in target if r not in original]
    if not set(adding) <= live:
        return (f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                f"live broker list: {sorted(live)}")
    return None
