import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Share consumers (KIP-932) of the Java client 4.x, with explicit acknowledgement.
 *
 * <pre>
 * java ShareConsumers explicit BOOTSTRAP TOPIC GROUP CONSUMERS RECORDS
 *     CONSUMERS consumers in threads read the RECORDS records already in TOPIC (values v0..):
 *     v(i) with i % 10 == 3 is released at its first delivery, with i % 10 == 7 rejected, the
 *     others accepted; each consumer commits after every poll. Ends once every record not
 *     rejected was accepted.
 * java ShareConsumers hold BOOTSTRAP TOPIC GROUP
 *     polls until it has records, prints "HELD n", then keeps them without acknowledging.
 * java ShareConsumers drain BOOTSTRAP TOPIC GROUP EXPECT
 *     accepts records until EXPECT were accepted.
 * java ShareConsumers checked BOOTSTRAP TOPIC GROUP CONSUMERS RECORDS
 *     CONSUMERS consumers in threads accept every record, slowly, and commitSync after every
 *     poll; each record received prints "DELIVERED value deliveryCount consumer", and once the
 *     commit answered "CONFIRMED value" (its partition's acknowledgement succeeded) or
 *     "FAILED value" (it failed, or the commit threw: it may still have taken effect). Ends
 *     once every record was confirmed or failed and nothing was delivered for 5 s.
 * </pre>
 * Prints "ACCEPTED value deliveryCount consumer", "RELEASED value", "REJECTED value".
 */
public final class ShareConsumers {
    static final long TIMEOUT_MS = 90_000;

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", "5");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaShareConsumer<>(p);
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2], group = args[3];
        if (mode.equals("checked")) {
            checked(bootstrap, topic, group, Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        } else if (mode.equals("explicit")) {
            explicit(bootstrap, topic, group, Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        } else if (mode.equals("hold")) {
            try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group)) {
                c.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + TIMEOUT_MS;
                while (System.currentTimeMillis() < deadline) {
                    var records = c.poll(Duration.ofMillis(500));
                    if (!records.isEmpty()) {
                        say("HELD " + records.count());
                        Thread.sleep(TIMEOUT_MS);  // killed by the test meanwhile
                    }
                }
            }
            System.exit(1);
        } else {
            int expect = Integer.parseInt(args[4]);
            Map<String, Short> accepted = new ConcurrentHashMap<>();
            read(0, consumer(bootstrap, group), topic, accepted, expect, false);
            System.exit(accepted.size() == expect ? 0 : 1);
        }
    }

    static void checked(String bootstrap, String topic, String group, int consumers, int records)
            throws Exception {
        Set<String> settled = ConcurrentHashMap.newKeySet();
        AtomicLong lastDelivery = new AtomicLong(System.currentTimeMillis());
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new CopyOnWriteArrayList<>();
        for (int i = 0; i < consumers; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group)) {
                    c.subscribe(List.of(topic));
                    while (!stop.get()) {
                        List<String> acked = new ArrayList<>();
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                            say("DELIVERED " + r.value() + " " + r.deliveryCount().orElse((short) -1)
                                + " " + id);
                            lastDelivery.set(System.currentTimeMillis());
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                            acked.add(r.value());
                            Thread.sleep(20);
                        }
                        if (acked.isEmpty()) {
                            continue;
                        }
                        boolean ok;
                        try {
                            ok = c.commitSync().values().stream().allMatch(Optional::isEmpty);
                        } catch (Exception e) {
                            say("COMMIT " + e);
                            ok = false;
                        }
                        for (String v : acked) {
                            say((ok ? "CONFIRMED " : "FAILED ") + v);
                            settled.add(v);
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            threads.add(t);
            t.start();
        }
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline
               && (settled.size() < records || System.currentTimeMillis() - lastDelivery.get() < 5000)) {
            Thread.sleep(100);
        }
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        say("DONE " + settled.size());
        System.exit(settled.size() == records ? 0 : 1);
    }

    static void explicit(String bootstrap, String topic, String group, int consumers, int records)
            throws Exception {
        int expect = 0;
        for (int i = 0; i < records; i++) {
            expect += i % 10 == 7 ? 0 : 1;
        }
        Map<String, Short> accepted = new ConcurrentHashMap<>();
        List<Thread> threads = new CopyOnWriteArrayList<>();
        final int want = expect;
        for (int i = 0; i < consumers; i++) {
            final int id = i;
            Thread t = new Thread(() -> read(id, consumer(bootstrap, group), topic, accepted, want, true));
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        say("DONE " + accepted.size());
        System.exit(accepted.size() == want ? 0 : 1);
    }

    static void read(int id, KafkaShareConsumer<String, String> c, String topic,
                     Map<String, Short> accepted, int expect, boolean slow) {
        Set<String> released = ConcurrentHashMap.newKeySet();
        try (c) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (accepted.size() < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    int i = Integer.parseInt(r.value().substring(1));
                    short count = r.deliveryCount().orElse((short) -1);
                    if (i % 10 == 7) {
                        c.acknowledge(r, AcknowledgeType.REJECT);
                        say("REJECTED " + r.value());
                    } else if (i % 10 == 3 && count == 1 && released.add(r.value())) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        say("RELEASED " + r.value());
                    } else {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        if (accepted.putIfAbsent(r.value(), count) != null) {
                            say("TWICE " + r.value());
                        }
                        say("ACCEPTED " + r.value() + " " + count + " " + id);
                    }
                    if (slow) {
                        Thread.sleep(30);
                    }
                }
                c.commitSync();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
