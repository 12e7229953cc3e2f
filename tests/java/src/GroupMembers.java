import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Classic consumer-group members of the Java client (compiles against kafka-clients 3.9 and 4.x).
 *
 * <pre>
 * java GroupMembers takeover BOOTSTRAP TOPIC GROUP PARTITIONS MEMBERS PRODUCED EXTRA
 *     MEMBERS consumers in threads subscribe, poll and commitSync until the PRODUCED records
 *     already in the topic (values v0..) are read; the last member closes (LeaveGroup); the
 *     others must take over all PARTITIONS; EXTRA more records (vPRODUCED..) are produced and
 *     must be read by the survivors.
 * java GroupMembers resume BOOTSTRAP TOPIC GROUP EXPECT
 *     one member reads until EXPECT records arrived, waits 2 s for extras, commits, closes.
 * </pre>
 * -Dgroup.protocol=consumer makes the members use the consumer group protocol (KIP-848).
 * Prints "ASSIGNMENT i [p, ...]", "VALUES v,v,...", "CHECK name OK|FAIL reason"; exit 1 on failure.
 */
public final class GroupMembers {
    static final long TIMEOUT_MS = 60_000;

    static void check(boolean ok, String name, String detail) {
        System.out.println("CHECK " + name + (ok ? " OK " : " FAIL ") + detail);
        System.out.flush();
        if (!ok) {
            throw new IllegalStateException(name + ": " + detail);
        }
    }

    static boolean await(BooleanSupplier cond, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            if (cond.getAsBoolean()) {
                return true;
            }
            Thread.sleep(50);
        }
        return cond.getAsBoolean();
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        String protocol = System.getProperty("group.protocol", "classic");
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        } else {
            // KIP-848: the coordinator owns the session and heartbeat settings
            p.put("group.protocol", protocol);
        }
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    /** One member polled by its own thread; commitSync after every non-empty poll and on revoke. */
    static final class Member implements Runnable {
        final int id;
        final KafkaConsumer<String, String> consumer;
        final String topic;
        final List<String> values = new CopyOnWriteArrayList<>();
        volatile Set<Integer> assignment = Collections.emptySet();
        volatile boolean stop;
        volatile Throwable error;
        final Thread thread;

        Member(int id, String bootstrap, String topic, String group) {
            this.id = id;
            this.topic = topic;
            this.consumer = new KafkaConsumer<>(consumerProps(bootstrap, group));
            this.thread = new Thread(this, "member-" + id);
        }

        public void run() {
            try {
                consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        if (!parts.isEmpty()) {
                            consumer.commitSync();
                        }
                    }

                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    }
                });
                while (!stop) {
                    ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : recs) {
                        values.add(r.value());
                    }
                    if (!recs.isEmpty()) {
                        consumer.commitSync();
                    }
                    Set<Integer> now = new TreeSet<>();
                    for (TopicPartition tp : consumer.assignment()) {
                        now.add(tp.partition());
                    }
                    assignment = now;
                }
            } catch (Throwable t) {
                error = t;
                t.printStackTrace();
            } finally {
                consumer.close(Duration.ofSeconds(20)); // LeaveGroup
            }
        }
    }

    static List<String> all(List<Member> members) {
        List<String> out = new ArrayList<>();
        for (Member m : members) {
            out.addAll(m.values);
        }
        return out;
    }

    static boolean covers(List<Member> members, int partitions) {
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            if (m.error != null || m.assignment.isEmpty()) {
                return false;
            }
            union.addAll(m.assignment);
            total += m.assignment.size();
        }
        return union.size() == partitions && total == partitions;
    }

    static String describe(List<Member> members) {
        StringBuilder sb = new StringBuilder();
        for (Member m : members) {
            sb.append(" member").append(m.id).append('=').append(m.assignment)
              .append("/read ").append(m.values.size())
              .append(m.error == null ? "" : "/error " + m.error);
        }
        return sb.toString();
    }

    static void takeover(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], group = a[3];
        int partitions = Integer.parseInt(a[4]), n = Integer.parseInt(a[5]);
        int produced = Integer.parseInt(a[6]), extra = Integer.parseInt(a[7]);
        List<Member> members = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Member m = new Member(i, bootstrap, topic, group);
            members.add(m);
            m.thread.start();
        }
        try {
            check(await(() -> covers(members, partitions) && all(members).size() >= produced,
                        TIMEOUT_MS), "split", describe(members));
            for (Member m : members) {
                System.out.println("ASSIGNMENT " + m.id + " " + m.assignment);
            }
            Member leaving = members.remove(members.size() - 1);
            Set<Integer> orphaned = leaving.assignment;
            leaving.stop = true;
            leaving.thread.join(30_000);
            check(!leaving.thread.isAlive() && leaving.error == null, "leave",
                  "member" + leaving.id + " closed, its partitions " + orphaned);
            check(await(() -> covers(members, partitions), TIMEOUT_MS), "takeover",
                  describe(members));
            for (Member m : members) {
                System.out.println("ASSIGNMENT " + m.id + " " + m.assignment);
            }
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = produced; i < produced + extra; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, "v" + i)).get();
                }
            }
            List<Member> everyone = new ArrayList<>(members);
            everyone.add(leaving);
            check(await(() -> all(everyone).size() >= produced + extra, TIMEOUT_MS), "survivors_read",
                  describe(everyone));
            Thread.sleep(1000);
            System.out.println("VALUES " + String.join(",", all(everyone)));
        } finally {
            for (Member m : members) {
                m.stop = true;
            }
            for (Member m : members) {
                m.thread.join(30_000);
            }
        }
        for (Member m : members) {
            check(m.error == null, "close", "member" + m.id);
        }
    }

    static void resume(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], group = a[3];
        int expect = Integer.parseInt(a[4]);
        Member m = new Member(0, bootstrap, topic, group);
        m.thread.start();
        try {
            check(await(() -> m.error != null || m.values.size() >= expect, TIMEOUT_MS), "resume_read",
                  describe(Collections.singletonList(m)));
            Thread.sleep(2000); // anything read twice would show up now
        } finally {
            m.stop = true;
            m.thread.join(30_000);
        }
        check(m.error == null, "close", "member0");
        System.out.println("VALUES " + String.join(",", m.values));
    }

    public static void main(String[] args) throws Exception {
        System.out.println("kafka-clients " + AppInfoParser.getVersion());
        try {
            if (args[0].equals("takeover")) {
                takeover(args);
            } else if (args[0].equals("resume")) {
                resume(args);
            } else {
                throw new IllegalArgumentException(args[0]);
            }
        } catch (IllegalStateException e) {
            System.out.flush();
            System.exit(1);
        }
        System.out.flush();
        System.exit(0);
    }
}
