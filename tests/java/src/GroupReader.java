import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer-group member (Kafka 4.x, group.protocol=consumer) that commits what it read
 * after each poll (commitSync of the offsets after the batch's records).
 *
 * <pre>java GroupReader BOOTSTRAP TOPIC GROUP</pre>
 * One JSON object a line on stdout, each with "t" (ms since the epoch):
 * {"assigned": [partitions]} after each change of its assignment, {"read": [[partition,
 * offset, value], ...]} for each poll, {"committed": [[partition, offset], ...]} after a
 * commit succeeded, {"commit_failed": "..."} after one failed. It runs until killed.
 */
public final class GroupReader {
    static void emit(String json) {
        System.out.println("{\"t\": " + System.currentTimeMillis() + ", " + json + "}");
        System.out.flush();
    }

    public static void main(String[] args) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put("group.protocol", "consumer");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                assigned(consumer);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                assigned(consumer);
            }
        });
        while (true) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
            if (records.isEmpty()) {
                continue;
            }
            StringBuilder read = new StringBuilder("\"read\": [");
            Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
            String comma = "";
            for (ConsumerRecord<String, String> r : records) {
                read.append(comma).append("[").append(r.partition()).append(", ").append(r.offset())
                    .append(", \"").append(r.value()).append("\"]");
                next.put(new TopicPartition(r.topic(), r.partition()),
                         new OffsetAndMetadata(r.offset() + 1));
                comma = ", ";
            }
            emit(read.append("]").toString());
            try {
                consumer.commitSync(next);
                StringBuilder done = new StringBuilder("\"committed\": [");
                String sep = "";
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet()) {
                    done.append(sep).append("[").append(e.getKey().partition()).append(", ")
                        .append(e.getValue().offset()).append("]");
                    sep = ", ";
                }
                emit(done.append("]").toString());
            } catch (Exception e) {
                emit("\"commit_failed\": \"" + e.getClass().getSimpleName() + "\"");
            }
        }
    }

    static void assigned(KafkaConsumer<String, String> consumer) {
        StringBuilder sb = new StringBuilder("\"assigned\": [");
        String sep = "";
        for (TopicPartition tp : consumer.assignment()) {
            sb.append(sep).append(tp.partition());
            sep = ", ";
        }
        emit(sb.append("]").toString());
    }
}
