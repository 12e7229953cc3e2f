import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer that also commits a group's offsets in each transaction.
 *
 * <pre>java Tv2Transactions BOOTSTRAP TOPIC GROUP TRANSACTIONAL_ID COUNT</pre>
 * Transaction i writes "v{i}" to TOPIC-0 and offset i+1 of TOPIC-0 for GROUP; every third
 * transaction (i % 3 == 2) is aborted, the others committed. Prints "DONE" at the end.
 */
public final class Tv2Transactions {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int count = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[3]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        ConsumerGroupMetadata group = new ConsumerGroupMetadata(args[2]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int i = 0; i < count; i++) {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "v" + i)).get();
                producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(i + 1)), group);
                if (i % 3 == 2) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        System.out.println("DONE");
    }
}
