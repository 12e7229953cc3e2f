"""Followers copy their leaders' logs with the ordinary Fetch API (v15: topics by id, and the
replica's id with its broker epoch in replica_state, which the leader checks before it lets the
replica into an ISR, KIP-903).

One `ReplicaFetcher` per leader broker runs a loop: fetch from each followed partition's log
end offset, append the batches verbatim (leader's offsets and epochs), and take the leader's
high watermark (capped at our log end). When the leader answers with a diverging epoch (our
last fetched epoch ends earlier on the leader, KIP-595/KIP-320), the log is truncated to where
the two agree, never blindly to the high watermark. A fetcher keeps an incremental fetch
session with its leader (broker/replication/follower_session.py), as Kafka's followers do: each
fetch names only the partitions whose position moved, and the leader answers only those with
something new.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode, KafkaError

from ..network.interbroker import BrokerConnection, BrokerUnavailable
from .follower_session import FetchPosition, FollowedKey, FollowerFetchSession, SessionFetch
from .partition import Partition
from .replication_quota import ReplicationQuota

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

FETCH_KEY, FETCH_VERSION = 1, 15
_BACKOFF_S = 0.2


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, store: MetadataStore, config: Any) -> None:
        self.broker_id = broker_id
        self.store = store
        self.config = config
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._stopped = False
        self.quota: ReplicationQuota | None = None  # the follower side of the throttles
        # This broker's epoch (its registration's czxid), carried in each fetch: -1 none.
        self.broker_epoch: Callable[[], int] = lambda: -1

    def add(self, partition: Partition) -> None:
        self._discard(partition)
        if self._stopped:
            return  # shutting down: no new fetchers
        leader = partition.leader_id
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = self._fetchers[leader] = ReplicaFetcher(self, leader)
        fetcher.add(partition)
        self._shut_down_idle()

    def remove(self, partition: Partition) -> None:
        self._discard(partition)
        self._shut_down_idle()

    def _discard(self, partition: Partition) -> None:
        for fetcher in self._fetchers.values():
            fetcher.discard(partition)

    def _shut_down_idle(self) -> None:
        """Kafka's shutdownIdleFetcherThreads: a fetcher left without partitions stops and
        closes its connection. Kept, it would go on waiting for the answer to a fetch sent
        before its leader was cut off (up to the request time-out, 30 s), and when that broker
        led again the fetches would wait behind it while the leader took this healthy
        follower out of the ISR, below min.insync.replicas (issue 45)."""
        for leader, fetcher in list(self._fetchers.items()):
            if fetcher.idle:
                del self._fetchers[leader]
                fetcher.shut_down()

    async def stop(self) -> None:
        self._stopped = True
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self._partitions: dict[tuple[str, int], Partition] = {}
        # the names of the topics followed (or once followed) from this leader, by id
        self._names: dict[uuid.UUID, str] = {}
        self._conn = BrokerConnection(
            manager.store, leader_id, f"samsa-replica-fetcher-{manager.broker_id}"
        )
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.session = FollowerFetchSession(leader_id)

    def add(self, partition: Partition) -> None:
        self._partitions[(partition.topic, partition.index)] = partition
        self._names[partition.topic_id] = partition.topic
        self._wakeup.set()
        if self._stopped:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def discard(self, partition: Partition) -> None:
        self._partitions.pop((partition.topic, partition.index), None)

    @property
    def idle(self) -> bool:
        return not self._partitions

    def shut_down(self) -> None:
        """Stop without waiting: the loop is cancelled at a wait (a fetch, a back-off), never
        inside the application of an answer, which awaits nothing."""
        self._stopped = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
        self._conn.close()

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's wait_for can swallow a cancellation
        # that races with the response it was waiting for, and the loop would go on.
        self._stopped = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._conn.close()

    async def _run(self) -> None:
        cfg = self.manager.config
        while not self._stopped:
            if not self._partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            quota = self.manager.quota
            throttled: set[tuple[str, int]] = set()
            if quota is not None and quota.active:
                throttled = {key for key, p in self._partitions.items()
                             if self.manager.broker_id not in p.isr
                             and quota.is_throttled(*key)}
                if throttled and quota.exceeded():
                    skip = throttled
                else:
                    skip = set()
            else:
                skip = set()
            fetched, positions = self._positions(skip, cfg["replica.fetch.max.bytes"])
            if not fetched:
                await asyncio.sleep(_BACKOFF_S)  # throttled: wait for the rate to fall
                continue
            session_fetch = self.session.build(positions)
            try:
                response = await self._conn.request(
                    FETCH_KEY, FETCH_VERSION, self._request(session_fetch, cfg)
                )
            except BrokerUnavailable as exc:
                self.session.failed()
                log.debug("fetch from broker %d failed: %s", self.leader_id, exc)
                await asyncio.sleep(_BACKOFF_S * 5)
                continue
            except Exception:
                self.session.failed()
                log.exception("fetch from broker %d failed", self.leader_id)
                await asyncio.sleep(_BACKOFF_S * 5)
                continue
            if not self.session.answered(
                    session_fetch, response.error_code, response.session_id,
                    ((topic.topic_id, pr.partition_index) for topic in response.responses
                     for pr in topic.partitions)):
                # a session error: the next fetch is a full one, at once; a full fetch whose
                # answer did not fit it is tried again after a back-off
                if session_fetch.full:
                    await asyncio.sleep(_BACKOFF_S)
                continue
            backoff = False
            names = self._names
            for topic in response.responses:
                name = names.get(topic.topic_id)
                if name is None:
                    continue
                for pr in topic.partitions:
                    entry = fetched.get((name, pr.partition_index))
                    if entry is None or entry[0].topic_id != topic.topic_id:
                        continue  # (not fetched, or a topic of that name deleted since)
                    partition, epoch, offset = entry
                    current = self._partitions.get((name, pr.partition_index))
                    if (current is not partition or partition.leader_epoch != epoch
                            or partition.log_end_offset != offset):
                        # leadership moved, or the log was truncated, while the fetch was in
                        # flight: what this answer told the session is asked again in full
                        self.session.resend_all()
                        continue
                    if quota is not None and (name, pr.partition_index) in throttled:
                        quota.record(len(pr.records or b""))
                    backoff |= not self._apply(partition, pr)
            if backoff:
                await asyncio.sleep(_BACKOFF_S)

    def _positions(self, skip: set[tuple[str, int]], max_bytes: int,
                   ) -> tuple[dict[tuple[str, int], tuple[Partition, int, int]],
                              dict[FollowedKey, FetchPosition]]:
        """The partitions to fetch from this leader (all followed from it but `skip`), each
        with its leader epoch and log end offset as the fetch is sent, and their fetch
        parameters as the session compares them."""
        fetched: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        positions: dict[FollowedKey, FetchPosition] = {}
        leader_id = self.leader_id
        for key, p in self._partitions.items():
            if p.leader_id != leader_id or key in skip:
                continue
            log = p.log
            epoch, offset, latest = p.leader_epoch, log.log_end_offset, log.latest_epoch
            fetched[key] = (p, epoch, offset)
            positions[(p.topic_id, key[1])] = FetchPosition(
                epoch, offset, -1 if latest is None else latest, log.log_start_offset,
                max_bytes)
        return fetched, positions

    def _request(self, fetch: SessionFetch, cfg: Any) -> dict[str, Any]:
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for (topic_id, index), position in fetch.to_send.items():
            topics.setdefault(topic_id, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": position.current_leader_epoch,
                    "fetch_offset": position.fetch_offset,
                    "last_fetched_epoch": position.last_fetched_epoch,
                    "log_start_offset": position.log_start_offset,
                    "partition_max_bytes": position.partition_max_bytes,
                }
            )
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in fetch.forgotten:
            forgotten.setdefault(topic_id, []).append(index)
        return {
            "cluster_id": None,
            "replica_state": {"replica_id": self.manager.broker_id,
                              "replica_epoch": self.manager.broker_epoch()},
            "max_wait": cfg["replica.fetch.wait.max.ms"],
            "min_bytes": cfg["replica.fetch.min.bytes"],
            "max_bytes": cfg["replica.fetch.response.max.bytes"],
            "isolation_level": 0,
            "session_id": fetch.session_id,
            "session_epoch": fetch.epoch,
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic_id": t, "partitions": ps}
                                      for t, ps in forgotten.items()],
            "rack_id": "",
        }

    def _apply(self, partition: Partition, pr: Any) -> bool:
        """Apply one partition's answer; False means back off before fetching it again."""
        code = int(pr.error_code)
        try:
            if code == ErrorCode.none:
                diverging = pr.diverging_epoch
                if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                    self._truncate_diverging(partition, diverging.epoch, diverging.end_offset)
                    return True
                partition.append_as_follower(
                    pr.records or b"", pr.high_watermark, pr.log_start_offset
                )
                return True
            if code == ErrorCode.offset_out_of_range:
                leader_start = pr.log_start_offset
                if leader_start > partition.log_end_offset:
                    log.info("%s-%d: behind the leader's log start %d: starting over there",
                             partition.topic, partition.index, leader_start)
                    partition.truncate_fully_and_start_at(leader_start)
                elif pr.high_watermark >= 0 and pr.high_watermark < partition.log_end_offset:
                    log.warning("%s-%d: ahead of the leader: truncating to its high watermark %d",
                                partition.topic, partition.index, pr.high_watermark)
                    partition.truncate_to(max(pr.high_watermark, partition.high_watermark))
                return True
        except KafkaError as exc:  # a StorageError or a record-format error
            log.error("%s-%d: replication append failed: %s", partition.topic, partition.index,
                      exc)
            return False
        log.debug("%s-%d: leader %d answered %d", partition.topic, partition.index,
                  self.leader_id, code)
        return False

    def _truncate_diverging(self, partition: Partition, epoch: int, end_offset: int) -> None:
        if epoch < 0:
            target = partition.high_watermark
        else:
            local_epoch, local_end = partition.end_offset_for_epoch(epoch)
            target = min(end_offset, local_end) if local_epoch == epoch else local_end
            if local_epoch < 0:
                target = partition.high_watermark
        target = min(target, partition.log_end_offset)
        log.info("%s-%d: diverged from leader %d at epoch %d (end %d): truncating %d -> %d",
                 partition.topic, partition.index, self.leader_id, epoch, end_offset,
                 partition.log_end_offset, target)
        partition.truncate_to(target)
