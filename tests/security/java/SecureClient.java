import java.io.FileReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Produce with one producer, spread over some seconds, then consume everything back in a
 * consumer group, with the client security settings of a properties file.
 *
 * <pre>java -cp ... SecureClient CLIENT_PROPERTIES TOPIC COUNT SECONDS</pre>
 *
 * Prints "CONSUMED n" and exits 0 when every record came back in order.
 */
public final class SecureClient {
    public static void main(String[] args) throws Exception {
        Properties common = new Properties();
        try (FileReader in = new FileReader(args[0])) {
            common.load(in);
        }
        String topic = args[1];
        int n = Integer.parseInt(args[2]);
        long pauseMs = Long.parseLong(args[3]) * 1000 / n;
        Properties p = new Properties();
        p.putAll(common);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                Thread.sleep(pauseMs);
            }
        }
        System.out.println("PRODUCED " + n);
        Properties c = new Properties();
        c.putAll(common);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                }
            }
            consumer.commitSync();
        }
        for (int i = 0; i < n; i++) {
            if (i >= got.size() || !got.get(i).equals("v" + i)) {
                System.out.println("MISMATCH at " + i + ": " + got);
                System.exit(1);
            }
        }
        System.out.println("CONSUMED " + got.size());
    }
}
