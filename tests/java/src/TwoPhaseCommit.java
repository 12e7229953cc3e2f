import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A producer configured for two-phase commit (KIP-939, transaction.two.phase.commit.enable).
 * kafka-clients 4.4 accepts the setting but does not yet set Enable2Pc in its InitProducerId
 * (nor offer prepareTransaction/completeTransaction): on the wire it is a transactional producer
 * that speaks InitProducerId v6 where the broker lists it.
 *
 * <pre>java TwoPhaseCommit BOOTSTRAP TOPIC TRANSACTIONAL_ID COUNT</pre>
 * Commits COUNT transactions, each writing "v{i}" to TOPIC-0, and prints "DONE"; on failure
 * prints "FAILED" and the exception's class name, and exits 1.
 */
public final class TwoPhaseCommit {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        props.put(ProducerConfig.TRANSACTION_TWO_PHASE_COMMIT_ENABLE_CONFIG, "true");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int i = 0; i < Integer.parseInt(args[3]); i++) {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(args[1], 0, null, "v" + i)).get();
                producer.commitTransaction();
            }
        } catch (Exception e) {
            Throwable cause = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException
                ? e.getCause() : e;
            System.out.println("FAILED " + cause.getClass().getName());
            System.exit(1);
        }
        System.out.println("DONE");
    }
}
