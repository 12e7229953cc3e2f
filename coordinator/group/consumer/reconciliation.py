"""A member's reconciliation toward its target assignment (Kafka's CurrentAssignmentBuilder):
revoke first, then take the partitions their previous owners have released."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

from .model import Assignment, AssignmentEpochs, ConsumerMember, MemberState, copy_assignment


class FencedMemberEpoch(Exception):
    pass


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int],
              owned: list[tuple[uuid.UUID, list[int]]] | None) -> ConsumerMember:
    """The member's next state towards `target` (a copy; `member` is not changed). `owned` is
    what the member reported owning in this heartbeat (None: not reported)."""

    def owns_revoked(pending: Assignment) -> bool:
        if owned is None:
            return True
        return any(p in pending.get(tid, ()) for tid, ps in owned for p in ps)

    def next_assignment(epoch: int, current: Assignment) -> ConsumerMember:
        unreleased = False
        assigned: Assignment = {}
        revoking: Assignment = {}
        pending_assign: Assignment = {}
        for tid in set(target) | set(current):
            want = target.get(tid, set())
            have = current.get(tid, set())
            keep = have & want
            revoke = have - keep
            add = want - keep
            free = {p for p in add if partition_epoch(tid, p) == -1}
            if free != add:
                unreleased = True
            if keep:
                assigned[tid] = set(keep)
            if revoke:
                revoking[tid] = revoke
            if free:
                pending_assign[tid] = free
        if revoking and owns_revoked(revoking):
            return _with(member, MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoking)
        for tid, ps in pending_assign.items():
            assigned.setdefault(tid, set()).update(ps)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return _with(member, state, target_epoch, assigned, {})

    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return next_assignment(member.member_epoch, member.assigned)
        return member
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked(member.pending_revocation):
            return member
        return next_assignment(member.member_epoch + 1, member.assigned)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(member.member_epoch, member.assigned)
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return next_assignment(target_epoch, member.assigned)


def _with(member: ConsumerMember, state: MemberState, epoch: int, assigned: Assignment,
          revoking: Assignment) -> ConsumerMember:
    """Kafka's Builder.updateMemberEpoch: the previous epoch becomes the current one. A
    partition kept from the member's assigned ones keeps its assignment epoch; one new to them
    (one pending revocation given back included) gets `epoch`."""
    epochs: AssignmentEpochs = {}
    for a in (assigned, revoking):
        for tid, ps in a.items():
            for p in ps:
                held = (member.assignment_epoch(tid, p) if p in member.assigned.get(tid, ())
                        else None)
                epochs[(tid, p)] = epoch if held is None else held
    return replace(member, state=state, member_epoch=epoch,
                   previous_member_epoch=member.member_epoch,
                   assigned=copy_assignment(assigned), pending_revocation=copy_assignment(revoking),
                   assignment_epochs=epochs,
                   session_timer=member.session_timer, rebalance_timer=member.rebalance_timer)
