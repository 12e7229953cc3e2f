import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * End-to-end smoke test of the Java client against a broker, written to compile and run
 * unchanged against kafka-clients 3.9.x and 4.x.
 *
 * <pre>java -cp ... ClientSmoke BOOTSTRAP TOPIC RECORDS_PER_CODEC [REPLICATION_FACTOR]</pre>
 *
 * REPLICATION_FACTOR (default 1) is the topic's; describe_topic checks that every partition
 * has that many replicas, all in sync, and reports the leaders.
 *
 * Prints "CHECK name OK [detail]" per passed check, "CHECK name FAIL reason" on the first
 * failure, then stops (after trying to delete the topic) and exits 1.
 */
public final class ClientSmoke {
    static final long TIMEOUT_S = 30;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PARTITIONS = 3;

    static void ok(String check, String detail) {
        System.out.println("CHECK " + check + " OK" + (detail.isEmpty() ? "" : " " + detail));
        System.out.flush();
    }

    static final class CheckFailed extends RuntimeException {
        CheckFailed(String msg) { super(msg); }
    }

    static void require(boolean cond, String msg) {
        if (!cond) throw new CheckFailed(msg);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println(
                    "usage: ClientSmoke BOOTSTRAP TOPIC RECORDS_PER_CODEC [REPLICATION_FACTOR]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int perCodec = Integer.parseInt(args[2]);
        short replicationFactor = args.length > 3 ? Short.parseShort(args[3]) : 1;
        System.out.println("kafka-clients " + AppInfoParser.getVersion());

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");

        String current = "start";
        boolean created = false;
        int rc = 0;
        try (Admin admin = Admin.create(ap)) {
            try {
                current = "create_topic";
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, replicationFactor)))
                        .all().get(TIMEOUT_S, TimeUnit.SECONDS);
                created = true;
                ok(current, topic);

                current = "describe_topic";
                TopicDescription td = admin.describeTopics(List.of(topic))
                        .allTopicNames().get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
                require(td != null, "no description for " + topic);
                require(td.partitions().size() == PARTITIONS,
                        "partitions=" + td.partitions().size());
                List<Integer> leaders = new ArrayList<>();
                for (var p : td.partitions()) {
                    require(p.leader() != null && !p.leader().isEmpty(), "no leader for " + p);
                    require(p.replicas().size() == replicationFactor
                            && p.isr().size() == replicationFactor, "replicas/isr of " + p);
                    leaders.add(p.leader().id());
                }
                require(td.topicId() != null, "no topic id");
                ok(current, "partitions=" + td.partitions().size() + " id=" + td.topicId()
                        + " leaders=" + leaders);

                current = "list_topics";
                Set<String> names = admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS);
                require(names.contains(topic), topic + " not in " + names);
                ok(current, "");

                current = "alter_configs";
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "123456789"),
                                AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"),
                                AlterConfigOp.OpType.SET)));
                admin.incrementalAlterConfigs(ops).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                ok(current, "");

                current = "describe_configs";
                Config cfg = admin.describeConfigs(List.of(res))
                        .all().get(TIMEOUT_S, TimeUnit.SECONDS).get(res);
                require(cfg != null, "no config returned");
                ConfigEntry ret = cfg.get("retention.ms");
                require(ret != null && "123456789".equals(ret.value()),
                        "retention.ms=" + (ret == null ? null : ret.value()));
                require(ret.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                        "retention.ms source=" + ret.source());
                ConfigEntry mmb = cfg.get("max.message.bytes");
                require(mmb != null && "2000000".equals(mmb.value()),
                        "max.message.bytes=" + (mmb == null ? null : mmb.value()));
                ConfigEntry cp = cfg.get("cleanup.policy");
                require(cp != null && "delete".equals(cp.value()),
                        "cleanup.policy default=" + (cp == null ? null : cp.value()));
                ok(current, "entries=" + cfg.entries().size());

                current = "produce";
                Map<TopicPartition, List<Long>> ackedOffsets = new TreeMap<>(
                        (a, b) -> Integer.compare(a.partition(), b.partition()));
                Map<String, String> expected = new HashMap<>(); // "p/o" -> key=value
                int total = 0;
                for (String codec : CODECS) {
                    Properties pp = new Properties();
                    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                    pp.put(ProducerConfig.ACKS_CONFIG, "all");
                    pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
                    pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                    pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
                    pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
                    pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
                    try (KafkaProducer<String, String> producer = new KafkaProducer<>(
                            pp, new StringSerializer(), new StringSerializer())) {
                        List<Future<RecordMetadata>> futs = new ArrayList<>();
                        List<String> kvs = new ArrayList<>();
                        for (int i = 0; i < perCodec; i++) {
                            String k = codec + "-key-" + (i % 11);
                            String v = (codec + "-value-" + i + "|").repeat(1 + i % 7);
                            ProducerRecord<String, String> r = new ProducerRecord<>(topic, k, v);
                            r.headers().add("codec", codec.getBytes());
                            r.headers().add("i", Integer.toString(i).getBytes());
                            futs.add(producer.send(r));
                            kvs.add(k + "=" + v + ";codec=" + codec + ";i=" + i);
                        }
                        producer.flush();
                        for (int i = 0; i < futs.size(); i++) {
                            RecordMetadata md = futs.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                            TopicPartition tp = new TopicPartition(topic, md.partition());
                            ackedOffsets.computeIfAbsent(tp, x -> new ArrayList<>())
                                    .add(md.offset());
                            String prev = expected.put(md.partition() + "/" + md.offset(),
                                    kvs.get(i));
                            require(prev == null, "offset acknowledged twice: "
                                    + md.partition() + "/" + md.offset());
                        }
                    }
                    total += perCodec;
                }
                for (var e : ackedOffsets.entrySet()) {
                    List<Long> offs = new ArrayList<>(e.getValue());
                    offs.sort(Long::compare);
                    for (int i = 0; i < offs.size(); i++) {
                        require(offs.get(i) == i, e.getKey() + " acked offsets not dense: "
                                + offs.subList(0, Math.min(offs.size(), 20)));
                    }
                }
                ok(current, "records=" + total + " codecs=" + String.join(",", CODECS)
                        + " partitions_used=" + ackedOffsets.size());

                current = "list_offsets";
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < PARTITIONS; p++) {
                    TopicPartition tp = new TopicPartition(topic, p);
                    tps.add(tp);
                    latest.put(tp, OffsetSpec.latest());
                    earliest.put(tp, OffsetSpec.earliest());
                }
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> lo =
                        admin.listOffsets(latest).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> eo =
                        admin.listOffsets(earliest).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                long sum = 0;
                for (TopicPartition tp : tps) {
                    long acked = ackedOffsets.getOrDefault(tp, List.of()).size();
                    require(eo.get(tp).offset() == 0, tp + " earliest=" + eo.get(tp).offset());
                    require(lo.get(tp).offset() == acked,
                            tp + " latest=" + lo.get(tp).offset() + " acked=" + acked);
                    sum += lo.get(tp).offset();
                }
                require(sum == total, "sum of end offsets " + sum + " != " + total);
                ok(current, "end_offsets_sum=" + sum);

                current = "consume";
                Properties cp2 = new Properties();
                cp2.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                cp2.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                cp2.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                cp2.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
                cp2.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                        cp2, new StringDeserializer(), new StringDeserializer())) {
                    consumer.assign(tps);
                    consumer.seekToBeginning(tps);
                    Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
                    for (TopicPartition tp : tps) {
                        require(ends.get(tp) == lo.get(tp).offset(),
                                tp + " consumer endOffsets " + ends.get(tp));
                    }
                    Map<Integer, Long> next = new HashMap<>();
                    int seen = 0;
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
                    while (seen < total) {
                        require(System.nanoTime() < deadline,
                                "consumed " + seen + " of " + total + " before timeout");
                        for (ConsumerRecord<String, String> r
                                : consumer.poll(Duration.ofMillis(500))) {
                            long want = next.getOrDefault(r.partition(), 0L);
                            require(r.offset() == want, "partition " + r.partition()
                                    + " offset " + r.offset() + ", expected " + want);
                            next.put(r.partition(), want + 1);
                            Header hc = r.headers().lastHeader("codec");
                            Header hi = r.headers().lastHeader("i");
                            require(hc != null && hi != null, "headers missing at "
                                    + r.partition() + "/" + r.offset());
                            String got = r.key() + "=" + r.value() + ";codec="
                                    + new String(hc.value()) + ";i=" + new String(hi.value());
                            String exp = expected.get(r.partition() + "/" + r.offset());
                            require(got.equals(exp), "record at " + r.partition() + "/"
                                    + r.offset() + " is " + got + ", expected " + exp);
                            seen++;
                        }
                    }
                    ok(current, "records=" + seen);
                }

                current = "delete_topic";
                admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                created = false;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
                while (admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS)
                        .contains(topic)) {
                    require(System.nanoTime() < deadline, topic + " still listed after delete");
                    Thread.sleep(200);
                }
                ok(current, "");
                System.out.println("ALL CHECKS PASSED");
            } catch (Throwable t) {
                rc = 1;
                String msg = t instanceof CheckFailed ? t.getMessage() : t.toString();
                Throwable cause = t.getCause();
                if (cause != null && !(t instanceof CheckFailed)) msg += " caused by " + cause;
                System.out.println("CHECK " + current + " FAIL " + msg);
                if (!(t instanceof CheckFailed)) t.printStackTrace();
                if (created) {
                    try {
                        admin.deleteTopics(List.of(topic)).all().get(10, TimeUnit.SECONDS);
                    } catch (Exception ignored) {
                        // best effort
                    }
                }
            }
        }
        System.out.flush();
        System.exit(rc);
    }
}
