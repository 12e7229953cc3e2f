"""The controller's leader and ISR choices (broker/cluster/leader_election.py), as Kafka's
PartitionLeaderElectionAlgorithms and ZooKeeper-era controller make them, on partition states
without a cluster: the cluster tests show the writes; these show each choice."""

from __future__ import annotations

from samsa.broker.cluster.leader_election import (
    PREFERRED,
    UNCLEAN,
    assignment_state,
    completed_reassignment_state,
    elected_state,
    invalid_target,
    next_state,
    offline_candidates,
    shutdown_state,
)

EPOCH = 7  # the controller's epoch every new state carries


def state(leader: int, isr: list[int], leader_epoch: int = 3) -> dict[str, object]:
    return {"leader": leader, "leader_epoch": leader_epoch, "isr": isr, "controller_epoch": 1,
            "version": 1}


def test_offline_candidates_are_live_isr_members_in_assignment_order() -> None:
    doc = state(-1, [3, 2, 1])
    assert offline_candidates(doc, [1, 2, 3], {2, 3}, unclean=False) == [2, 3]
    assert offline_candidates(doc, [1, 2, 3], {4}, unclean=True) == []
    # an out-of-sync replica only when no ISR member is alive, and unclean election allowed
    assert offline_candidates(state(-1, [1]), [1, 2, 3], {2, 3}, unclean=False) == []
    assert offline_candidates(state(-1, [1]), [1, 2, 3], {2, 3}, unclean=True) == [2, 3]
    assert offline_candidates(state(-1, [1, 2]), [1, 2, 3], {2, 3}, unclean=True) == [2]


def test_a_partition_whose_replicas_are_all_alive_is_left_alone() -> None:
    assert next_state(state(1, [1, 2, 3]), [1, 2, 3], {1, 2, 3}, False, EPOCH) is None


def test_a_dead_follower_leaves_the_isr_at_the_same_leader_epoch() -> None:
    new = next_state(state(1, [1, 2, 3]), [1, 2, 3], {1, 3}, False, EPOCH)
    assert new == {**state(1, [1, 3]), "controller_epoch": EPOCH}


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_of_the_assignment() -> None:
    new = next_state(state(1, [3, 1, 2]), [1, 2, 3], {2, 3}, False, EPOCH)
    assert new is not None
    assert (new["leader"], new["leader_epoch"], new["isr"], new["controller_epoch"]) == (
        2, 4, [3, 2], EPOCH)


def test_with_no_live_isr_member_the_partition_goes_offline_keeping_its_last_isr() -> None:
    new = next_state(state(1, [1]), [1, 2], {2}, False, EPOCH)
    assert new is not None
    assert (new["leader"], new["leader_epoch"], new["isr"]) == (-1, 4, [1])
    # already offline: nothing to write until an ISR member is back
    assert next_state(state(-1, [1], 4), [1, 2], {2}, False, EPOCH) is None
    # ...and then it leads again
    back = next_state(state(-1, [1], 4), [1, 2], {1, 2}, False, EPOCH)
    assert back is not None and (back["leader"], back["isr"]) == (1, [1])


def test_unclean_election_takes_a_live_replica_out_of_the_isr_as_its_only_member() -> None:
    new = next_state(state(1, [1]), [1, 2, 3], {3}, True, EPOCH)
    assert new is not None and (new["leader"], new["isr"]) == (3, [3])


def test_a_broker_shutting_down_is_not_elected_though_alive() -> None:
    # 2 is alive (it stays in the ISR) but in a controlled shutdown: 3 leads
    new = next_state(state(1, [1, 2, 3]), [1, 2, 3], {2, 3}, False, EPOCH, eligible={3})
    assert new is not None and (new["leader"], new["isr"]) == (3, [2, 3])
    # nobody eligible: offline rather than led by the stopping broker
    off = next_state(state(1, [1, 2]), [1, 2], {2}, False, EPOCH, eligible=set())
    assert off is not None and off["leader"] == -1


def test_a_restarted_leader_with_no_other_isr_member_is_reestablished_one_epoch_up() -> None:
    # broker 1 registered again in a new life: handled as failed (not in live) and started
    new = next_state(state(1, [1, 2]), [2, 1], set(), False, EPOCH, restarted={1, 2})
    assert new is not None
    assert (new["leader"], new["leader_epoch"], new["isr"]) == (1, 4, [1, 2])
    # a live ISR member is preferred to a restarted one
    other = next_state(state(1, [1, 2]), [1, 2], {2}, False, EPOCH, restarted={1})
    assert other is not None and (other["leader"], other["isr"]) == (2, [2])


def test_a_preferred_election_needs_the_first_replica_alive_and_in_the_isr() -> None:
    doc = state(2, [2, 3])
    assert elected_state(PREFERRED, doc, [1, 2, 3], {1, 2, 3}, EPOCH) is None  # 1 not in ISR
    doc = state(2, [2, 1])
    assert elected_state(PREFERRED, doc, [1, 2, 3], {2, 3}, EPOCH) is None  # 1 not alive
    new = elected_state(PREFERRED, doc, [1, 2, 3], {1, 2}, EPOCH)
    assert new is not None
    assert (new["leader"], new["leader_epoch"], new["isr"]) == (1, 4, [2, 1])  # ISR as it was


def test_an_unclean_election_asked_for_prefers_an_isr_member_then_any_live_replica() -> None:
    assert elected_state(UNCLEAN, state(-1, [1, 3]), [1, 2, 3], {2, 3}, EPOCH)["leader"] == 3
    new = elected_state(UNCLEAN, state(-1, [1]), [1, 2, 3], {2, 3}, EPOCH)
    assert new is not None and (new["leader"], new["isr"]) == (2, [2])
    assert elected_state(UNCLEAN, state(-1, [1]), [1, 2], set(), EPOCH) is None


def test_a_reassignment_moves_a_leader_leaving_the_replica_set_to_a_live_isr_member() -> None:
    new = assignment_state(state(4, [4, 1, 2]), [1, 2, 3], {1, 2, 3}, EPOCH)
    assert (new["leader"], new["leader_epoch"], new["isr"]) == (1, 4, [1, 2])
    # the leader stays in the set: it keeps leading, one epoch up
    same = assignment_state(state(2, [2, 1]), [1, 2, 3], {1, 2, 3}, EPOCH)
    assert (same["leader"], same["leader_epoch"], same["isr"]) == (2, 4, [2, 1])
    # no ISR member of the set alive and in sync: no leader, and the last ISR stays
    none = assignment_state(state(4, [4]), [1, 2], {1, 2}, EPOCH)
    assert (none["leader"], none["isr"]) == (-1, [4])


def test_reassignment_targets_are_refused_with_kafkas_messages() -> None:
    assert invalid_target([], [1], {1}) == (
        "Empty replica list specified in partition reassignment.")
    assert invalid_target([1, 1], [1], {1}) == (
        "Duplicate replica ids in partition reassignment replica list: [1, 1]")
    assert invalid_target([1, -2], [1], {1}) == "Invalid broker id in replica list: [1, -2]"
    assert invalid_target([1, 5], [1], {1, 2}) == (
        "Replica assignment has brokers that are not alive. Replica list: [5], "
        "live broker list: [1, 2]")
    # a replica already assigned may be kept though it is down
    assert invalid_target([1, 2], [1], {2}) is None


def test_a_controlled_shutdown_moves_leadership_to_a_live_isr_member_not_stopping() -> None:
    # broker 1 stops; 2 is stopping too; 3 is the first replica that may lead
    new = shutdown_state(state(1, [1, 2, 3]), 1, [1, 2, 3], {3}, {1, 2}, EPOCH)
    assert new is not None
    assert (new["leader"], new["leader_epoch"], new["isr"]) == (3, 4, [3])
    # nobody to take it: the leadership stays (the broker reports it as still led there)
    assert shutdown_state(state(1, [1, 2]), 1, [1, 2], set(), {1}, EPOCH) is None


def test_a_controlled_shutdown_takes_a_follower_out_of_the_isr_but_not_the_last_member() -> None:
    new = shutdown_state(state(2, [2, 1]), 1, [1, 2], {2}, {1}, EPOCH)
    assert new == {**state(2, [2]), "controller_epoch": EPOCH}  # same leader epoch
    # the ISR would be empty without it: left alone
    assert shutdown_state(state(2, [1]), 1, [1, 2], {2}, {1}, EPOCH) is None
    # a partition it neither leads nor follows in sync
    assert shutdown_state(state(2, [2]), 1, [1, 2], {2}, {1}, EPOCH) is None


def test_a_completed_reassignment_drops_the_removed_replicas_and_keeps_a_target_leader() -> None:
    # 1..3 -> 2..4: 1 leaves; the leader 2 is in the target and stays, one epoch up
    new = completed_reassignment_state(state(2, [1, 2, 3, 4]), [2, 3, 4], {1, 2, 3, 4}, EPOCH)
    assert new is not None
    assert (new["leader"], new["leader_epoch"], new["isr"]) == (2, 4, [2, 3, 4])
    # a leader being removed hands over to the first live target replica in the ISR
    moved = completed_reassignment_state(state(1, [1, 3, 4]), [4, 3], {1, 3}, EPOCH)
    assert moved is not None and (moved["leader"], moved["isr"]) == (3, [3, 4])
    # no target replica in the ISR alive: not completed yet
    assert completed_reassignment_state(state(1, [1, 4]), [4], {1}, EPOCH) is None
