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
 * Produce and consume (in a consumer group) over SASL_SSL with SCRAM-SHA-512.
 *
 * <pre>java -cp ... SaslSmoke BOOTSTRAP TOPIC USER PASSWORD CA_PEM [tokenauth]</pre>
 *
 * With "tokenauth" USER and PASSWORD are a delegation token's id and HMAC (base64).
 *
 * Prints "CONSUMED n" and exits 0 when every record came back.
 */
public final class SaslSmoke {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], user = args[2], password = args[3];
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        common.put("security.protocol", "SASL_SSL");
        common.put("sasl.mechanism", "SCRAM-SHA-512");
        common.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule"
                + " required username=\"" + user + "\" password=\"" + password + "\""
                + (args.length > 5 && args[5].equals("tokenauth") ? " tokenauth=\"true\"" : "")
                + ";");
        common.put("ssl.truststore.type", "PEM");
        common.put("ssl.truststore.location", args[4]);
        int n = 20;
        Properties p = new Properties();
        p.putAll(common);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        Properties c = new Properties();
        c.putAll(common);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, "sasl-smoke-" + topic);
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
            if (!got.get(i).equals("v" + i)) {
                System.out.println("MISMATCH at " + i + ": " + got.get(i));
                System.exit(1);
            }
        }
        System.out.println("CONSUMED " + got.size());
    }
}
