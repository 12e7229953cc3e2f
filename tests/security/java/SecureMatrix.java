import java.io.FileReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * For each client properties file (its security settings): produce, consume in a consumer
 * group and commit, then a transaction that commits (with the group's offsets sent to it) and
 * one that aborts, read back read_committed.
 *
 * <pre>java -cp ... SecureMatrix TOPIC_PREFIX CLIENT_PROPERTIES...</pre>
 *
 * Prints "OK name" per properties file and exits 0 when every check passed.
 */
public final class SecureMatrix {
    public static void main(String[] args) throws Exception {
        for (int a = 1; a < args.length; a++) {
            Properties common = new Properties();
            try (FileReader in = new FileReader(args[a])) {
                common.load(in);
            }
            String name = new java.io.File(args[a]).getName().replace(".properties", "");
            run(common, args[0] + "-" + name);
            System.out.println("OK " + name);
        }
    }

    private static void run(Properties common, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        int n = 5;
        Properties p = new Properties();
        p.putAll(common);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        Properties c = consumerProps(common, topic + "-group", "read_uncommitted");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
            }
            consumer.commitSync();
            check(consumer.committed(java.util.Set.of(tp)).get(tp).offset() == n,
                  "group offset committed");
        }
        check(got.size() == n, "consumed " + got);

        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-txn");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "committed"));
            producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(n)),
                                              new ConsumerGroupMetadata(topic + "-txn-group"));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "aborted"));
            producer.flush();
            producer.abortTransaction();
        }
        List<String> committed = new ArrayList<>();
        Properties rc = consumerProps(common, topic + "-txn-group", "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(rc)) {
            check(consumer.committed(java.util.Set.of(tp)).get(tp).offset() == n,
                  "offset committed by the transaction");
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 30_000;
            while (consumer.position(tp) < n + 4 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    committed.add(r.value());
                }
            }
        }
        check(committed.size() == n + 1 && committed.get(n).equals("committed"),
              "read_committed " + committed);
    }

    private static Properties consumerProps(Properties common, String group, String isolation) {
        Properties c = new Properties();
        c.putAll(common);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return c;
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAILED: " + what);
            System.exit(1);
        }
    }
}
