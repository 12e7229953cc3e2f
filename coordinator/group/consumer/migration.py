"""Online migration between classic and consumer-protocol (KIP-848) groups
(`group.consumer.migration.policy`): Kafka's ConsumerGroup.fromClassicGroup and
ClassicGroup.fromConsumerGroup conversions, and when a group may go back to classic. A part of
`GroupCoordinator`: `ConsumerGroups` (groups.py) owns the consumer groups' state and the
heartbeat they go through, `ClassicGroups` (../classic/groups.py) the classic groups; the
classic members of a consumer group are `ClassicMembers` (classic_members.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.protocol.errors import ErrorCode

from ..classic.model import ClassicGroup, GroupState, Member
from ..common import GroupError, now_ms
from ..partitions import GroupPartitions
from ..records import (
    decode_consumer_assignment,
    encode_consumer_assignment,
    group_metadata_key,
)
from ..records import (
    group_metadata_value as classic_group_value,
)
from ..records import (
    subscribed_topics as classic_subscribed_topics,
)
from .model import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    copy_assignment,
)
from .records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Records,
    current_assignment_record,
    epoch_record,
    key,
    member_record,
    target_epoch_record,
    target_member_record,
)

if TYPE_CHECKING:
    from ..classic.groups import ClassicGroups
    from .groups import ConsumerGroups

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class ConsumerMigration:
    """Online migration between classic and consumer groups. Owns no state: it changes
    `consumer`'s groups (through its heartbeat, snapshots and timers) and `classic`'s."""

    def __init__(self, partitions: GroupPartitions, consumer: ConsumerGroups,
                 classic: ClassicGroups) -> None:
        self.partitions = partitions
        self.consumer = consumer
        self.classic = classic

    # ------------------------------------------------------------------ online migration
    def from_classic(self, classic: ClassicGroup, p: int) -> tuple[ConsumerGroup, Records]:
        """Kafka's ConsumerGroup.fromClassicGroup: the classic group's members, generation
        and assignment as a consumer group (not installed), and the records that write it."""
        epoch = classic.generation
        group = ConsumerGroup(classic.group_id, p, group_epoch=epoch, assignment_epoch=epoch)
        records: Records = [epoch_record(group.group_id, epoch)]
        for m in classic.members.values():
            metadata = (m.metadata(classic.protocol_name) if classic.protocol_name
                        else m.protocols[0][1] if m.protocols else b"")
            assigned: Assignment = {}
            for topic, partitions in decode_consumer_assignment(m.assignment).items():
                info = self.partitions.topics_view.topic_info(topic)
                if info is not None and partitions:
                    assigned[info[0]] = set(partitions)
            member = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=sorted(classic_subscribed_topics(metadata)),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=epoch,
                previous_member_epoch=epoch, assigned=assigned,
                classic_session_ms=m.session_timeout_ms, classic_protocols=list(m.protocols))
            group.update_member(None, member)
            group.target[m.member_id] = copy_assignment(assigned)
            records += [member_record(group.group_id, member),
                        target_member_record(group.group_id, m.member_id, assigned),
                        current_assignment_record(group.group_id, member)]
        records.append(target_epoch_record(group.group_id, epoch))
        group.subscription_metadata = self.consumer.subscription_metadata(
            list(group.members.values()))
        return group, records

    def downgradable(self, group: ConsumerGroup, leaving_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers, before the member is removed
        (whatever its protocol): members are left, all of the classic protocol, the policy
        allows a downgrade and they fit in a classic group."""
        others = [m for m in group.members.values() if m.member_id != leaving_id]
        if not others or any(m.classic_protocols is None for m in others):
            return False
        if self.consumer.migration_policy not in ("downgrade", "bidirectional"):
            log.info("cannot downgrade consumer group %s to a classic group: the online "
                     "downgrade is disabled", group.group_id)
            return False
        if len(others) > self.classic.max_group_size:
            log.info("cannot downgrade consumer group %s to a classic group: its size is "
                     "greater than the classic group max size", group.group_id)
            return False
        return True

    def downgrade(self, group: ConsumerGroup, leaving_id: str
                  ) -> tuple[Records, Callable[[], None]] | None:
        """`to_classic` of the group `leaving_id` leaves, if it is `downgradable`."""
        if not self.downgradable(group, leaving_id):
            return None
        return self.to_classic(group, leaving_id)

    def replace_downgradable(self, group: ConsumerGroup, replaced_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMemberId: a classic static member
        takes the place of the group's last consumer-protocol member (the others all use
        the classic protocol), the policy allows a downgrade and the group fits in a
        classic group."""
        replaced = group.members.get(replaced_id)
        if replaced is None or replaced.classic_protocols is not None or \
                any(m.classic_protocols is None for m in group.members.values()
                    if m.member_id != replaced_id):
            return False
        if self.consumer.migration_policy not in ("downgrade", "bidirectional"):
            log.info("cannot downgrade consumer group %s to a classic group: the online "
                     "downgrade is disabled", group.group_id)
            return False
        if len(group.members) > self.classic.max_group_size:
            log.info("cannot downgrade consumer group %s to a classic group: its size is "
                     "greater than the classic group max size", group.group_id)
            return False
        return True

    def to_classic(self, group: ConsumerGroup, leaving_id: str | None,
                    rebalance: bool = True, generation: int | None = None,
                    ) -> tuple[Records, Callable[[], None]]:
        """Kafka's convertToClassicGroup: the records that delete the consumer group (every
        member's, the leaving one's too) and write the classic group of its other members
        (their target assignments, the group epoch as the generation), in Kafka's order; and
        what installs that classic group once they are written, which then rebalances unless
        the conversion is a static member's replacement (`rebalance` False). `generation`:
        the group epoch before the change (default: the group's)."""
        gid = group.group_id
        if generation is None:
            generation = group.group_epoch
        ids = list(group.members)
        records: Records = [(key(CURRENT_MEMBER_ASSIGNMENT, gid, m), None) for m in ids]
        records += [(key(TARGET_ASSIGNMENT_MEMBER, gid, m), None) for m in ids]
        records.append((key(TARGET_ASSIGNMENT_METADATA, gid), None))
        records += [(key(MEMBER_METADATA, gid, m), None) for m in ids]
        records += [(key(PARTITION_METADATA, gid), None), (key(GROUP_METADATA, gid), None)]
        converted = self._fill_classic(ClassicGroup(gid, group.partition), group, leaving_id,
                                       generation)
        records.append((group_metadata_key(gid),
                        classic_group_value(converted.to_value(now_ms()))))
        return records, functools.partial(self._install_classic, group, leaving_id, rebalance,
                                          generation)

    def _fill_classic(self, classic: ClassicGroup, group: ConsumerGroup,
                      leaving_id: str | None, generation: int) -> ClassicGroup:
        """Kafka's ClassicGroup.fromConsumerGroup: `classic` holds the consumer group's
        members but `leaving_id`, each with its target assignment, stable at
        `generation`."""
        classic.members.clear()
        classic.static_members.clear()
        classic.pending_members.clear()
        classic.leader_id = None
        classic.generation = generation
        classic.protocol_type = "consumer"
        for m in group.members.values():
            if m.member_id == leaving_id:
                continue
            assignment: dict[str, list[int]] = {}
            for tid, partitions in sorted(group.target.get(m.member_id, {}).items(),
                                          key=lambda kv: str(kv[0])):
                name = self.consumer.topic_name(tid)
                if name is not None and partitions:
                    assignment[name] = sorted(partitions)
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                               m.rebalance_timeout_ms, m.classic_session_ms, "consumer",
                               list(m.classic_protocols or ()),
                               assignment=encode_consumer_assignment(assignment)))
        classic.protocol_name = classic.select_protocol()
        classic.transition(GroupState.STABLE, now_ms())
        return classic

    def _install_classic(self, group: ConsumerGroup, leaving_id: str | None,
                         rebalance: bool, generation: int) -> None:
        gid = group.group_id
        classic = self.classic.groups.get(gid)
        if classic is None or classic.is_in(GroupState.DEAD):
            classic = self.classic.groups[gid] = ClassicGroup(gid, group.partition)
        for m in group.members.values():
            m.cancel_timers()
        self._fill_classic(classic, group, leaving_id, generation)
        group.dead = True
        if self.consumer.consumer_groups.get(gid) is group:
            del self.consumer.consumer_groups[gid]
        log.info("consumer group %s (epoch %d, %d classic members) converted to a classic "
                 "group", gid, group.group_epoch, len(classic.members))
        for member in classic.members.values():
            self.classic.rebalance.schedule_heartbeat(classic, member, member.session_timeout_ms)
        if rebalance:
            self.classic.rebalance.prepare_rebalance(
                classic, f"Downgrade group {gid} from consumer to classic.")

    def retire_classic(self, classic: ClassicGroup) -> None:
        """The classic group a consumer group took over: its members' pending JoinGroup and
        SyncGroup are answered REBALANCE_IN_PROGRESS (they rejoin the consumer group); only
        its committed offsets stay."""
        self.classic.rebalance.cancel_timers(classic)
        for m in classic.members.values():
            for fut in (m.join_future, m.sync_future):
                if fut is not None and not fut.done():
                    fut.set_result({"error_code": ErrorCode.rebalance_in_progress,
                                    "generation_id": -1, "protocol_type": None,
                                    "protocol_name": None, "leader": "",
                                    "member_id": m.member_id, "members": [],
                                    "assignment": b""})
        log.info("classic group %s (generation %d, %d members) converted to a consumer group",
                 classic.group_id, classic.generation, len(classic.members))
        classic.members.clear()
        classic.static_members.clear()
        classic.pending_members.clear()
        classic.leader_id = classic.protocol_name = None
        classic.transition(GroupState.EMPTY, now_ms())
        try:
            self.classic.store_group(classic)
        except GroupError as exc:
            log.warning("could not write the empty classic group %s: %s", classic.group_id,
                        exc.error_code.name)
